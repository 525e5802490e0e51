-- oom: the prelude of every script with a prelude, and of those that only
-- count (the re-entries, latchcountdown). Over maxmemory (noeviction keeps a full
-- Redis there) Redis refuses a script's first deny-oom command (HINCRBY,
-- INCR, ZADD, HSET) unless the script has written already.

-- write_first writes nothing, as a write (HDEL of a field no hash has): the
-- script's counting down, dropping or re-entering after it then runs over
-- maxmemory. hash must be a hash or absent.
local function write_first(hash)
  redis.call('hdel', hash, '#none')
end
