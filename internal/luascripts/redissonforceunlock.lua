-- redissonforceunlock: delete a Redisson-format lock whoever holds it and
-- tell its waiters, as RLock.forceUnlock does.
-- KEYS[1]  lock hash
-- ARGV[1]  the lock's channel (not a key: granted as a channel only)
-- ARGV[2]  wake spec (queue.lua; only its command counts)
-- Returns as forceunlock.lua does.
local bad = foreign('h')
if bad then
  return bad
end
if redis.call('del', KEYS[1]) == 0 then
  return 0
end
redis.call(publisher(ARGV[2]), ARGV[1], '0')
return 1
