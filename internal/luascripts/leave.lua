-- leave: a client stops waiting for a lock.
--
-- KEYS[1]  lock hash
-- KEYS[2]  the lock's channel   (same hash tag; see queue.lua)
-- KEYS[3]  wait queue           (same hash tag)
-- KEYS[4]  reservation          (same hash tag)
-- KEYS[5]  the wait queue's description hash (same hash tag)
-- ARGV[1]  the caller's client id
-- ARGV[2]  wake spec for the next client, e.g. "p50" (see queue.lua)
--
-- Takes the client off the queue, and passes a wake-up it already got (the
-- reservation) to the next client instead of letting it lapse. Run it before
-- unsubscribing: a wake-up published after the unsubscribe would be lost.
--
-- Returns 1 when the lock was reserved for the client (the reservation is
-- gone, and the next client was woken if the lock is free), else 0.
local lock, channel, queue, reservation, desc, client = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], ARGV[1]
dequeue(queue, desc, client)
if redis.call('get', reservation) ~= client then
  return 0
end
redis.call('del', reservation)
if redis.call('exists', lock) == 0 then
  wake(queue, desc, channel, reservation, ARGV[2])
end
return 1
