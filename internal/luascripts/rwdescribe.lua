-- rwdescribe: an RWMutex's state for Inspect, in one round trip, changing
-- nothing.
--
-- KEYS[1]  write hold B:w       KEYS[2]  readers B:rd (see rwqueue.lua)
-- KEYS[3]  reader queue B:qr    KEYS[4]  writer queue B:qw
-- ARGV[1]  the most queued clients to return per queue (> 0)
--
-- Returns {{owner, count, pttl, record, ...} of the write hold and the live
-- read holds, writer first (record "" when there is none), the write
-- hold's count of entries, reader queue, writer queue}, each queue as
-- queue_head describes it (queue.lua).
local w, readers = KEYS[1], KEYS[2]
local holds, writers = {}, 0
local kv = redis.call('hgetall', w)
local wpttl = redis.call('pttl', w)
local wrec = redis.call('hget', w, '#rec') or ''
for i = 1, #kv, 2 do
  if string.sub(kv[i], 1, 1) ~= '#' then
    writers = writers + 1
    for _, v in ipairs({kv[i], kv[i + 1], wpttl, wrec}) do
      holds[#holds + 1] = v
    end
  end
end
live_records(readers, holds)
local max = tonumber(ARGV[1])
return {holds, writers, queue_head(KEYS[3], KEYS[3] .. ':d', max), queue_head(KEYS[4], KEYS[4] .. ':d', max)}
