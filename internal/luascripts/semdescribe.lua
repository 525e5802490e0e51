-- semdescribe: a Semaphore's state for Inspect, in one round trip,
-- changing nothing.
--
-- KEYS[1..6]  as semqueue.lua says: the holders' B:h, B:h:e and B:h:rec,
--             the queue B:q with its descriptions B:q:d, the wants B:qn
-- ARGV[1]  the most queued clients to return (> 0)
--
-- Returns a describe reply (queue.lua): the holders whose lease has not
-- run out, with their permits as counts, the size, and a woken client
-- whose window is open.
local holds = {}
live_holds(holds, '', holders)
return {holds, {queue_head('', Q, ARGV[1], qn)}, sem_size() or 0, woken_of(Q) or ''}
