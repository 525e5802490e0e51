-- forceunlock: delete a Mutex whoever holds it, and the reservation a
-- release's wake-up left, and wake a waiter as a release would.
--
-- KEYS[1]  lock hash
-- KEYS[2]  the lock's channel   (same hash tag; see queue.lua)
-- KEYS[3]  wait queue           (same hash tag)
-- KEYS[4]  reservation          (same hash tag)
-- KEYS[5]  holder record        (same hash tag; see record.lua)
-- KEYS[6]  the wait queue's description hash (same hash tag)
-- ARGV[1]  wake spec, "p0" or "s0": PUBLISH or SPUBLISH, and no
--          reservation (see queue.lua)
--
-- Returns 1 when something was deleted (and the oldest listening queued
-- client woken, without a reservation), 0 when there was nothing (nothing
-- published), or the name of a key of another type (nothing deleted).
local bad = foreign('h-zssh')
if bad then
  return bad
end
if redis.call('del', KEYS[1], KEYS[5], KEYS[4]) == 0 then
  return 0
end
wake(KEYS[3], KEYS[6], KEYS[2], KEYS[4], ARGV[1])
return 1
