-- reenter: an owner that holds the lock takes one more hold.
-- KEYS[1]  lock hash {owner id -> hold count}
-- ARGV[1]  owner id
-- Returns the new hold count, or 0 when the owner holds no lock (it was
-- lost: nothing changed). A re-entry shares its hold's lease.
local lock, owner = KEYS[1], ARGV[1]
if redis.call('hexists', lock, owner) == 0 then
  return 0
end
-- It grows nothing but a count: a full Redis does not refuse it (oom.lua).
write_first(lock)
return redis.call('hincrby', lock, owner, 1)
