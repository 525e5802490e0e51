-- rwdescribe: an RWMutex's state for Inspect, in one round trip, changing
-- nothing.
--
-- KEYS[1..8]  as rwqueue.lua says: B:w, the read side's B:rd, B:rd:e and
--             B:rd:rec, the queues B:qr and B:qw with their descriptions
-- ARGV[1]  the most queued clients to return per queue (> 0)
--
-- Returns {{owner, count, pttl, record, ...} of the write hold and the read
-- holds whose lease has not run out, writer first (record "" when there is
-- none), the write hold's count of entries, reader queue, writer queue},
-- each queue as queue_head describes it (queue.lua).
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
live_holds(readers, server_ms(), holds)
local max = tonumber(ARGV[1])
return {holds, writers, queue_head(qr, qrd, max), queue_head(qw, qwd, max)}
