-- forceunlock: delete a Mutex whoever holds it, and the reservation a
-- release's wake-up left, and wake a waiter as a release would.
--
-- KEYS[1..5]  as describe.lua's: lock, queue, reservation, holder record,
--             the queue's descriptions (see queue.lua)
-- ARGV[1]  the lock's channel (see queue.lua)
-- ARGV[2]  wake spec, "p0" or "s0": PUBLISH or SPUBLISH, and no
--          reservation
--
-- Returns 1 when something was deleted (and the oldest listening queued
-- client woken, without a reservation), 0 when there was nothing (nothing
-- published), or the name of a key of another type (nothing deleted).
local bad = foreign('hzssh')
if bad then
  return bad
end
if redis.call('del', KEYS[1], KEYS[3], KEYS[4]) == 0 then
  return 0
end
wake(KEYS[2], KEYS[5], ARGV[1], KEYS[3], ARGV[2])
return 1
