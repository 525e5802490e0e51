-- rwleave: a client stops waiting for an RWMutex.
--
-- KEYS[1..8]  as rwqueue.lua says (B:w, B:rd, B:rd:e, B:rd:rec, B:qr, B:qr:d, B:qw, B:qw:d)
-- ARGV[1]  base key B           ARGV[2]  the caller's client id
-- ARGV[3]  wake spec (queue.lua's publisher), e.g. "p50"
-- ARGV[4]  the queue to leave: "r" for B:qr, "w" for B:qw
--
-- Takes the client off the queue and, when nobody writes, wakes whom that
-- may unblock (clients queued behind it). Run it before unsubscribing.
-- Returns 1 when the client was queued, else 0.
local removed = dequeue(ARGV[4] == 'w' and W or R, ARGV[2])
if redis.call('exists', w) == 0 then
  rw_wake(ARGV[3], redis.call('hlen', readers.counts))
end
return removed
