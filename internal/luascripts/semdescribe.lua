-- semdescribe: a Semaphore's state for Inspect, changing nothing.
-- KEYS[1..5]  semqueue.lua's
-- ARGV[1]  the most queued clients to return (> 0)
-- Returns a describe reply (inspect.lua): the live holders with their
-- permits as counts, and the size.
local holds = {}
live_holds(holds, '', holders)
return {holds, {queue_head('', Q, ARGV[1], qn)}, sem_size(tonumber(redis.call('hget', h, '#size'))) or 0, woken_of(Q) or ''}
