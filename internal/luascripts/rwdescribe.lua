-- rwdescribe: an RWMutex's state for Inspect, changing nothing.
-- KEYS[1..6]  rwqueue.lua's
-- ARGV[1]  the most queued clients to return per queue (> 0)
-- Returns a describe reply (inspect.lua): the write hold, then the live read
-- holds; the readers' queue, then the writers'; a woken writer, else reader.
check_types(readers)
local holds = {}
hash_holds(holds, 'write', w)
live_holds(holds, 'read', readers)
return {holds, {queue_head('read', R, ARGV[1]), queue_head('write', W, ARGV[1])}, 0, woken_of(W) or woken_of(R) or ''}
