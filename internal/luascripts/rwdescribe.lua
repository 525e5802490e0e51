-- rwdescribe: an RWMutex's state for Inspect, in one round trip, changing
-- nothing.
--
-- KEYS[1..8]  as rwqueue.lua says: B:w, the read side's B:rd, B:rd:e and
--             B:rd:rec, the queues B:qr and B:qw with their descriptions
-- ARGV[1]  the most queued clients to return per queue (> 0)
--
-- Returns a describe reply (queue.lua): the write hold, then the read
-- holds whose lease has not run out; the reader queue, then the writers';
-- a woken writer whose window is open, else such a reader.
local holds = {}
hash_holds(holds, 'write', w, redis.call('hget', w, '#rec') or '')
live_holds(holds, 'read', readers)
return {holds, {queue_head('read', R, ARGV[1]), queue_head('write', W, ARGV[1])}, 0, woken_of(W) or woken_of(R) or ''}
