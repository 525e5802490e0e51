-- leave: a client stops waiting for a lock; run before unsubscribing (a
-- wake-up published after it would be lost).
-- KEYS[1]  lock hash            KEYS[2]  the lock's channel
-- KEYS[3]  wait queue (queue.lua)
-- ARGV[1]  the caller's queue entry  ARGV[2]  wake spec (queue.lua)
-- Dequeues the client and, when the lock is free (a wake-up it got or
-- would get is lost), wakes the first. Returns 1 if it was queued, else 0.
local Q = {key = KEYS[3], ch = KEYS[2] .. ':'}
local removed = dequeue(Q, ARGV[1])
if removed == 1 and redis.call('exists', KEYS[1]) == 0 then
  wake(Q, ARGV[2], 1, one)
end
return removed
