-- semdescribe: a Semaphore's state for Inspect, in one round trip,
-- changing nothing.
--
-- KEYS[1..6]  as semqueue.lua says: the holders' B:h, B:h:e and B:h:rec,
--             the queue B:q with its descriptions B:q:d, the wants B:qn
-- ARGV[1]  the most queued clients to return (> 0)
--
-- Returns {{owner, permits, pttl, record, ...} of the holders whose lease
-- has not run out (record "" when there is none), size (0 when nobody
-- holds or waits), queue, {permits wanted or false, ...}}: queue as
-- queue_head describes it (queue.lua), the wants in its order.
local holds = {}
live_holds(holders, server_ms(), holds)
local size = sem_size() or 0
local head = queue_head(q, qd, tonumber(ARGV[1]))
local ids = {}
for i = 1, #head[1], 2 do
  ids[#ids + 1] = head[1][i]
end
local wants = {}
if #ids > 0 then
  wants = redis.call('hmget', qn, unpack(ids))
end
return {holds, size, head, wants}
