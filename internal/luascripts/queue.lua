-- queue: the prelude of every script that queues, wakes or describes
-- waiting clients: one fairness protocol for every kind (docs/design.md,
-- "Fairness"). A wait queue Q is {key = ZSET {client -> time queued, server
-- us; a woken client's: minus its window's end, server ms}, ch = the
-- prefix of "<ch><client id>"}. A client is its entry, "<client id>|<its
-- description>" (Go's QueueEntry): the description comes and goes with the
-- entry, at no write of its own. Callers pass the keys: the helpers build
-- no key names.

-- id_of is the client id of a queue entry.
local function id_of(client)
  local bar = string.find(client, '|', 1, true)
  return bar and string.sub(client, 1, bar - 1) or client
end

-- enqueue puts client at the back of Q unless queued (NX keeps its place)
-- and returns its rank and the wait (ms; may be a function of the rank). Q
-- lives the wait and 10 s more: past every bounded wait, not past an
-- abandoned lock; an extension adds 10 s more, sparing the next refusals
-- their PEXPIREs. fresh: the caller knows Q does not exist (no ZRANK, PTTL).
local function enqueue(Q, client, wait, fresh)
  redis.call('zadd', Q.key, 'NX', server_us(), client)
  local rank, left = 0, -1
  if not fresh then
    rank = redis.call('zrank', Q.key, client)
    left = redis.call('pttl', Q.key)
  end
  if type(wait) == 'function' then
    wait = wait(rank)
  end
  local ttl = math.max(wait, 0) + 10000
  if left < ttl then
    redis.call('pexpire', Q.key, ttl + 10000)
  end
  return rank, wait
end

-- refused is every acquire's refusal {0, wait, place, record}: wait (ms)
-- the state may last without a message (-1: no bound); place in Q (1: next;
-- 0: not queued); record the holder's or '', to name who blocked a waiter.
local function refused(queued, Q, client, wait, record, fresh)
  local place = 0
  if queued then
    local rank
    rank, wait = enqueue(Q, client, wait, fresh)
    place = rank + 1
  end
  return {0, wait, place, record or ''}
end

-- dequeue takes client off Q: 1 when it was queued, else 0. A Semaphore's
-- Q.wants {client -> permits} loses it too, and goes with the last client.
local function dequeue(Q, client)
  local removed = redis.call('zrem', Q.key, client)
  if Q.wants then
    redis.call('hdel', Q.wants, client)
    if redis.call('exists', Q.key) == 0 then
      redis.call('del', Q.wants)
    end
  end
  return removed
end

-- publisher is the command of a wake spec: "p" PUBLISH or "s" SPUBLISH,
-- then the wake window in ms (0: none), one argument to keep calls short.
local function publisher(spec)
  if string.sub(spec, 1, 1) == 's' then
    return 'spublish'
  end
  return 'publish'
end

-- wake walks Q oldest first, up to stop (the caller), admitting clients
-- while their weights (weigh(client, score); nil stops) fit in room: one in
-- its window counts, untold; one past it is told and dropped; any other is
-- told (dropped if nobody listens) and given a window. With tell, the first
-- that does not fit is told too, windowless, as a probe. It returns how
-- many it admitted and the first end of their windows (server ms; nil:
-- none).
local function wake(Q, spec, room, weigh, stop, tell)
  -- The first page before the set-up: a release that nobody waits for
  -- (the uncontended path) stops here.
  local e = redis.call('zrange', Q.key, 0, 0, 'WITHSCORES')
  if #e == 0 then
    return 0, nil
  end
  local publish, window = publisher(spec), tonumber(string.sub(spec, 2))
  local used, n, first, windows = 0, 0, nil, {}
  -- visit: false ends the walk; gone, the client was dropped.
  local function visit(c, s)
    if c == stop then
      return false
    end
    if s < 0 and -s < server_ms() then
      -- Its window passed: it loses its place, told, lest a client refused
      -- in its window sleep out a holder's lease untold.
      redis.call(publish, Q.ch .. id_of(c), 'unlock')
      dequeue(Q, c)
      return true, true
    end
    local w = weigh(c, s)
    if w == nil then
      return false
    end
    local fits = used + w <= room
    if s < 0 and fits then
      used, n, first = used + w, n + 1, math.min(first or -s, -s)
      return true
    end
    if not (fits or tell) then
      return false
    end
    if redis.call(publish, Q.ch .. id_of(c), 'unlock') == 0 then
      dequeue(Q, c)
      return true, true
    end
    if not fits then
      return false
    end
    used, n = used + w, n + 1
    if window > 0 then
      local ends = server_ms() + window
      first = math.min(first or ends, ends)
      windows[#windows + 1], windows[#windows + 2] = -ends, c
    end
    return true
  end
  local at, page = 0, 1
  while true do
    local more = #e == 2 * page
    for i = 1, #e, 2 do
      local go, gone = visit(e[i], tonumber(e[i + 1]))
      if not go then
        more = false
        break
      end
      if not gone then
        at = at + 1
      end
    end
    page = page * 2
    if not more or n > 0 and used >= room and not tell then
      break
    end
    e = redis.call('zrange', Q.key, at, at + page - 1, 'WITHSCORES')
  end
  if #windows > 0 then
    -- After the walk: a new score moves its client, and ranks with it.
    redis.call('zadd', Q.key, 'XX', unpack(windows))
  end
  return n, first
end

-- one is the weight of a client that takes the whole lock.
local function one()
  return 1
end

-- wait_for is a refusal's wait (ms) for the first of a window's end and a
-- hold's end (pttl, -1: none): -1 only when neither can end it.
local function wait_for(first, pttl)
  if first == nil then
    return pttl
  end
  local w = math.max(first - server_ms(), 0)
  if pttl >= 0 and pttl < w then
    return pttl
  end
  return w
end

-- woken_of is the id of Q's client whose window is open and ends last, or
-- nil.
local function woken_of(Q)
  local c = redis.call('zrangebyscore', Q.key, '-inf', '(' .. -server_ms(), 'LIMIT', 0, 1)[1]
  return c and id_of(c)
end

-- unwake drops Q's woken clients (for a force-unlock: told, they have not
-- come, and may never) and returns how many.
local function unwake(Q)
  local woken = redis.call('zrangebyscore', Q.key, '-inf', '(0')
  for _, c in ipairs(woken) do
    dequeue(Q, c)
  end
  return #woken
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

-- foreign returns the first of KEYS holding another type than types says
-- (a letter a key: h hash, z sorted set, s string, - unchecked), or nil:
-- force-unlock scripts delete nothing latchkey did not write (an
-- application's key under the prefix, say).
local function foreign(types)
  local read = {h = 'hlen', z = 'zcard', s = 'get'}
  for i = 1, #types do
    local cmd = read[string.sub(types, i, i)]
    if cmd then
      local r = redis.pcall(cmd, KEYS[i])
      if type(r) == 'table' and r.err then
        return KEYS[i]
      end
    end
  end
  return nil
end
