-- inspect: the prelude of the describe scripts (Inspect's), after queue.lua's
-- and, for the lease sides, leases.lua's. They change nothing.

-- woken_of is the id of Q's client whose window is open and ends last, or
-- nil.
local function woken_of(Q)
  local c = redis.call('zrangebyscore', Q.key, '-inf', '(' .. -server_ms(), 'LIMIT', 0, 1)[1]
  return c and id_of(c)
end

-- The describe scripts (Inspect's) reply {holds, queues, size, woken}:
-- holds {mode ("read", "write" or ""), owner, count, ms left (-1: none),
-- record or "", ...}, queues {queue_head, ...}, size a Semaphore's (else
-- 0), woken woken_of's or "". hold_entry appends one hold to holds.
local function hold_entry(out, mode, owner, count, left, record)
  for _, v in ipairs({mode, owner, count, left, record}) do
    out[#out + 1] = v
  end
end

-- hash_holds appends the holds of hash {owner -> count}, which shares one
-- lease (its expiry) and one record (its "#rec"), to out.
local function hash_holds(out, mode, hash)
  local kv = redis.call('hgetall', hash)
  local left = redis.call('pttl', hash)
  local record = redis.call('hget', hash, '#rec') or ''
  for i = 1, #kv, 2 do
    if string.sub(kv[i], 1, 1) ~= '#' then
      hold_entry(out, mode, kv[i], kv[i + 1], left, record)
    end
  end
end

-- queue_head describes Q's oldest max clients: {mode, {client id, score,
-- ...}, total, {description or false, ...}, {permits wanted, ...}}, the
-- wants read from a Semaphore's hash wants as its scripts read them.
local function queue_head(mode, Q, max, wants)
  local head = redis.call('zrange', Q.key, 0, tonumber(max) - 1, 'WITHSCORES')
  local clients, descs, want = {}, {}, {}
  for i = 1, #head, 2 do
    local c = head[i]
    clients[#clients + 1] = c
    head[i] = id_of(c)
    local desc = string.sub(c, #head[i] + 2)
    descs[#descs + 1] = desc ~= '' and desc
  end
  if wants and #clients > 0 then
    for i, w in ipairs(redis.call('hmget', wants, unpack(clients))) do
      want[i] = tonumber(w) or 1
    end
  end
  return {mode, head, redis.call('zcard', Q.key), descs, want}
end

-- live_holds appends the holds whose lease has not run out to out, a
-- describe reply's holds.
local function live_holds(out, mode, side)
  local now = server_ms()
  local live = redis.call('zrangebyscore', side.leases, now, '+inf', 'WITHSCORES')
  for i = 1, #live, 2 do
    local count = redis.call('hget', side.counts, live[i])
    if count then
      hold_entry(out, mode, live[i], count, tonumber(live[i + 1]) - now, redis.call('hget', side.records, live[i]) or '')
    end
  end
end
