-- enqueue: queue a client that has waiters on a lock (see queue.lua).
--
-- KEYS[1]  the lock's wait queue
-- ARGV[1]  client id
-- ARGV[2]  keep the queue at least this long, in ms
--
-- Used when a waiter that acquired without asking for its client to be
-- queued again finds that other waiters of its client joined meanwhile.
enqueue(KEYS[1], ARGV[1], tonumber(ARGV[2]))
return 1
