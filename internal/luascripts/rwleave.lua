-- rwleave: a client stops waiting for an RWMutex; run before unsubscribing.
-- KEYS[1..6]  rwqueue.lua's
-- ARGV[1]  base key B           ARGV[2]  the caller's queue entry
-- ARGV[3]  wake spec (queue.lua)
-- ARGV[4]  the queue to leave: "r" for B:qr, "w" for B:qw
-- Dequeues the client and, when nobody writes, wakes whom that may unblock.
-- Returns 1 when the client was queued, else 0.
local removed = dequeue(ARGV[4] == 'w' and W or R, ARGV[2])
if redis.call('exists', w) == 0 then
  rw_wake(ARGV[3], redis.call('hlen', readers.counts))
end
return removed
