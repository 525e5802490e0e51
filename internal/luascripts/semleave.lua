-- semleave: a client stops waiting for a Semaphore; run before unsubscribing.
-- KEYS[1..5]  semqueue.lua's
-- ARGV[1]  base key B           ARGV[2]  the caller's queue entry
-- ARGV[3]  the caller's size    ARGV[4]  wake spec (queue.lua)
-- Dequeues the client and wakes those behind it that now fit. Returns 1
-- when the client was queued, else 0.
local removed = dequeue(Q, ARGV[2])
local free = sem_free(ARGV[3], server_ms())
if removed == 1 and free > 0 then
  sem_wake(ARGV[4], free)
end
return removed
