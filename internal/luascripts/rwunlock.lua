-- rwunlock: drop one of an owner's read or write holds of an RWMutex; at the
-- last, wake whom the lock can now admit.
-- KEYS[1..6]  rwqueue.lua's
-- ARGV[1]  base key B           ARGV[2]  owner id
-- ARGV[3]  "r" read hold, "w" write hold     ARGV[5]  wake spec (queue.lua)
-- ARGV[4]  the owner's hold count before this release (exact)
-- ARGV[6]  "1" if an earlier call with these arguments may have run
-- Returns {left, woken}: the holds left and, at 0, the messages that reached
-- a client; {-1, 0} when not held with that count or the read lease ran out
-- (no change).
local owner, side, n, retry = ARGV[2], ARGV[3], tonumber(ARGV[4]), ARGV[6] == '1'
local left, earlier
if side == 'w' then
  -- No DEL: a retry must not delete a write hold someone took since.
  left, earlier = release_count(w, owner, n, retry)
  -- The record goes with the last hold, if it is the owner's (a retry may
  -- find a newer writer's).
  local rec = left == 0 and redis.call('hget', w, '#rec')
  if rec and string.sub(rec, 1, #owner + 1) == owner .. '|' then
    redis.call('hdel', w, '#rec')
  end
else
  if not retry and not lease_live(readers, owner, server_ms()) then
    return {-1, 0}
  end
  left, earlier = release_count(readers.counts, owner, n, retry)
  if left == 0 and n == 1 then
    lease_end(readers, owner)
  end
end
-- A retry does not wake twice what an earlier run woke.
if left ~= 0 or n ~= 1 or earlier or redis.call('exists', w) == 1 then
  return {left, 0}
end
local nreaders = redis.call('hlen', readers.counts)
if side == 'w' or nreaders == 0 then
  local _, _, woken = rw_wake(ARGV[5], nreaders)
  return {0, woken}
end
return {0, 0}
