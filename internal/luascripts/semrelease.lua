-- semrelease: an owner gives back all its permits of a Semaphore, and the
-- waiters the freed permits can serve are woken.
-- KEYS[1..5]  semqueue.lua's
-- ARGV[1]  base key B           ARGV[2]  owner id
-- ARGV[3]  the caller's size    ARGV[4]  wake spec (queue.lua)
-- ARGV[5]  "1" if an earlier call with these arguments may have run
-- Returns {status, woken}: 0 released (or a retry finding the owner gone),
-- -1 held nothing (its lease ran out; leftovers cleared); the messages
-- that reached a client.
local owner, spec, retry = ARGV[2], ARGV[4], ARGV[5] == '1'
local now = server_ms()
local live, field = lease_live(holders, owner, now), redis.call('hget', h, owner)
local has_field = field ~= false
local result = 0
if not (live and has_field) and not (retry and not live and not has_field) then
  result = -1
end
lease_end(holders, owner)
if has_field then
  -- Taken off the total with the field, so a retry that finds it gone
  -- takes off nothing.
  local n = tonumber(field)
  if n and n ~= 0 then
    redis.call('hincrby', h, '#held', -n)
  end
  redis.call('hdel', h, owner)
end
local free = sem_free(ARGV[3], now)
local woken = 0
if free > 0 then
  local _, _, told = sem_wake(spec, free)
  woken = told
end
return {result, woken}
