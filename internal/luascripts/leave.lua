-- leave: a client stops waiting for a lock.
--
-- KEYS[1]  lock hash
-- KEYS[2]  the lock's channel   (same hash tag; see queue.lua)
-- KEYS[3]  wait queue           (same hash tag)
-- KEYS[4]  the wait queue's description hash (same hash tag)
-- ARGV[1]  the caller's client id
-- ARGV[2]  wake spec for the next client, e.g. "p50" (see queue.lua)
--
-- Takes the client off the queue and, when the lock is free (a wake-up it
-- got, or is about to get, would otherwise be lost), wakes the client queued
-- first. Run it before unsubscribing: a wake-up published after the
-- unsubscribe would be lost. Returns 1 when the client was queued, else 0.
local Q = {key = KEYS[3], desc = KEYS[4], ch = KEYS[2] .. ':'}
local removed = dequeue(Q, ARGV[1])
if removed == 1 and redis.call('exists', KEYS[1]) == 0 then
  wake(Q, ARGV[2], 1, one)
end
return removed
