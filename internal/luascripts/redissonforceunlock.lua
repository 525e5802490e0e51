-- redissonforceunlock: delete a Redisson-format lock whoever holds it and
-- tell its waiters, as RLock.forceUnlock does.
-- KEYS[1]  lock hash            KEYS[2]  the lock's channel
-- ARGV[1]  the channel again (Intro's convention)
-- ARGV[2]  wake spec (queue.lua; only its command counts)
-- Returns as forceunlock.lua does.
local bad = foreign('h')
if bad then
  return bad
end
if redis.call('del', KEYS[1]) == 0 then
  return 0
end
redis.call(publisher(ARGV[2]), KEYS[2], '0')
return 1
