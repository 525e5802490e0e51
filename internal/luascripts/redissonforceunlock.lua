-- redissonforceunlock: delete a Redisson-format lock whoever holds it and
-- tell its waiters, as RLock.forceUnlock does.
--
-- KEYS[1]  lock hash            (see redissonacquire.lua)
-- KEYS[2]  the lock's channel   (see redissonrelease.lua)
-- ARGV[1]  the lock's channel, again (Intro's calling convention)
-- ARGV[2]  wake spec: "p..." PUBLISH, "s..." SPUBLISH
--
-- Returns 1 when the lock was deleted and "0" published, 0 when there was
-- none, or KEYS[1] when it holds another type than a hash (nothing
-- deleted: the name is some application's key, not a lock).
local fields = redis.pcall('hlen', KEYS[1])
if type(fields) == 'table' and fields.err then
  return KEYS[1]
end
if fields == 0 then
  return 0
end
redis.call('del', KEYS[1])
local publish = 'publish'
if string.sub(ARGV[2], 1, 1) == 's' then
  publish = 'spublish'
end
redis.call(publish, KEYS[2], '0')
return 1
