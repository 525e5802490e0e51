-- rwreenter: a reader that holds an RWMutex's read side takes one more hold.
--
-- KEYS[1]  readers B:rd (see rwqueue.lua)
-- ARGV[1]  owner id
--
-- Returns the owner's new hold count, or 0 when its read hold is gone
-- (lost: nothing changed). Its lease is left alone.
local readers, owner = KEYS[1], ARGV[1]
if redis.call('exists', readers .. ':' .. owner) == 0 or redis.call('hexists', readers, owner) == 0 then
  return 0
end
return redis.call('hincrby', readers, owner, 1)
