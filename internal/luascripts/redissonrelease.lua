-- redissonrelease: drop one hold of a Redisson-format lock; at the last,
-- hand it to an heir or delete it and tell every waiter, Java or Go.
-- KEYS[1]  lock hash (redissonacquire.lua's)
-- KEYS[2]  token counter (redissonacquire.lua's)
-- ARGV[1]  the lock's channel "redisson_lock__channel:{name}": not a key,
--          since an ACL user is granted it as a channel only
-- ARGV[2..7]  release.lua's ARGV[1..6], but ARGV[4] "publish" or
--             "spublish" (what the Java clients subscribe with), and no
--             heir's about
-- ARGV[8]  release.lua's ARGV[8]
-- Returns release.lua's reply; freed, it publishes Redisson's unlock "0"
-- and w is the subscribers reached. Retries go by the count (release_lock),
-- not Redisson's unlock-latch key.
local ch, publish = ARGV[1], ARGV[4]
local reply, shorter = release_lock(KEYS[1], KEYS[2], ARGV[2], tonumber(ARGV[3]), ARGV[5] == '1', ARGV[6] or '', ARGV[7], false, ARGV[8] == '1')
if shorter then
  redis.call(publish, ch, '0') -- the heir's lease ends first: ask again
end
if reply then
  return reply
end
return {0, redis.call(publish, ch, '0')}
