-- semdescribe: a Semaphore's state for Inspect, in one round trip,
-- changing nothing.
--
-- KEYS[1]  holders B:h          KEYS[2]  queue B:q (see semqueue.lua)
-- KEYS[3]  wants B:qn
-- ARGV[1]  the most queued clients to return (> 0)
--
-- Returns {{owner, permits, pttl, record, ...} of the live holders (record
-- "" when there is none), size (0 when nobody holds or waits), queue,
-- {permits wanted or false, ...}}: queue as queue_head describes it
-- (queue.lua), the wants in its order.
local h, q, qn = KEYS[1], KEYS[2], KEYS[3]
local holds = {}
live_records(h, holds)
local size = tonumber(redis.call('hget', h, '#size')) or tonumber(redis.call('hget', qn, '#size')) or 0
local head = queue_head(q, q .. ':d', tonumber(ARGV[1]))
local ids = {}
for i = 1, #head[1], 2 do
  ids[#ids + 1] = head[1][i]
end
local wants = {}
if #ids > 0 then
  wants = redis.call('hmget', qn, unpack(ids))
end
return {holds, size, head, wants}
