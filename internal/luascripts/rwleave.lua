-- rwleave: a client stops waiting for an RWMutex.
--
-- KEYS[1]  write hold B:w       KEYS[2]  readers B:rd (see rwqueue.lua)
-- KEYS[3]  the queue to leave, B:qr or B:qw
-- ARGV[1]  base key B           ARGV[2]  the caller's client id
-- ARGV[3]  wake spec, "p" or "s"
--
-- Takes the client off the queue and, when nobody writes, wakes whom that
-- may unblock (clients queued behind it). Run it before unsubscribing.
-- Returns 1 when the client was queued, else 0.
local removed = dequeue(KEYS[3], KEYS[3] .. ':d', ARGV[2])
if redis.call('exists', KEYS[1]) == 0 then
  rw_wake(ARGV[1], ARGV[3], redis.call('hlen', KEYS[2]))
end
return removed
