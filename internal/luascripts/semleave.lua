-- semleave: a client stops waiting for a Semaphore.
--
-- KEYS[1..6]  as semqueue.lua says (B:h, B:h:e, B:h:rec, B:q, B:q:d, B:qn)
-- ARGV[1]  base key B           ARGV[2]  the caller's client id
-- ARGV[3]  the caller's size    ARGV[4]  wake spec (queue.lua's publisher), e.g. "p50"
--
-- Takes the client off the queue and wakes whom that may unblock (clients
-- queued behind it that now fit). Run it before unsubscribing.
-- Returns 1 when the client was queued, else 0.
local removed = dequeue(Q, ARGV[2])
local size = sem_size() or tonumber(ARGV[3])
local held = sem_held(server_ms())
sem_settle()
if removed == 1 and size > held then
  sem_wake(ARGV[4], size - held)
end
return removed
