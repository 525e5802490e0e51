-- rwreenter: a reader that holds an RWMutex's read side takes one more hold.
-- KEYS[1]  readers B:rd         KEYS[2]  their lease set B:rd:e (rwqueue.lua)
-- ARGV[1]  owner id
-- Returns the new hold count, or 0 when the read hold is gone or its lease
-- ran out (nothing changed). The lease is left alone.
local readers, owner = {counts = KEYS[1], leases = KEYS[2]}, ARGV[1]
if not lease_live(readers, owner, server_ms()) or redis.call('hexists', readers.counts, owner) == 0 then
  return 0
end
write_first(readers.counts) -- a count only: see reenter.lua
return redis.call('hincrby', readers.counts, owner, 1)
