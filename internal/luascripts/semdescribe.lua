-- semdescribe: a Semaphore's state for Inspect, changing nothing.
-- KEYS[1..5]  semqueue.lua's
-- ARGV[1]  the most queued clients to return (> 0)
-- Returns a describe reply (inspect.lua): the live holders with their
-- permits as counts, and the size (0 when nobody live holds or waits).
check_types(holders)
redis.call('hlen', qn) -- read below only with no live holder, or queued clients
local holds = {}
live_holds(holds, '', holders)
-- Live state only: B:h's "#size" outlives dead holders until a script
-- drops them, B:qn's lives with the queue.
local size
if #holds > 0 then
  size = tonumber(redis.call('hget', h, '#size'))
end
size = size or sem_size() or 0
return {holds, {queue_head('', Q, ARGV[1], qn)}, size, woken_of(Q) or ''}
