-- queue: the prelude of every script that queues or wakes waiting clients
-- (and of those that describe or force them: inspect.lua, force.lua): one
-- fairness protocol for every kind (docs/design.md,
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

-- refused is every acquire's refusal {0, wait, place, record, left}: wait
-- (ms) the state may last without a message (-1: no bound); place in Q (1:
-- next; 0: not queued; the RWMutex's scripts count both queues instead);
-- record the holder's or '', to name who blocked a waiter, and left that
-- hold's lease left (ms, -1: no expiry): not always the wait, which a woken
-- client's window may end first.
local function refused(queued, Q, client, wait, record, left, fresh)
  local place = 0
  if queued then
    local rank
    rank, wait = enqueue(Q, client, wait, fresh)
    place = rank + 1
  end
  return {0, wait, place, record or '', left or -1}
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
-- many it admitted, the first end of their windows (server ms; nil: none),
-- how many messages reached a client (what a release reports) and how many
-- clients it dropped (a caller granted past them may owe a walk behind it).
local function wake(Q, spec, room, weigh, stop, tell)
  -- The first page before the set-up: a release that nobody waits for
  -- (the uncontended path) stops here.
  local e = redis.call('zrange', Q.key, 0, 0, 'WITHSCORES')
  if #e == 0 then
    return 0, nil, 0, 0
  end
  local publish, window = publisher(spec), tonumber(string.sub(spec, 2))
  local used, n, first, windows, told, dropped = 0, 0, nil, {}, 0, 0
  -- visit: false ends the walk; gone, the client was dropped.
  local function visit(c, s)
    if c == stop then
      return false
    end
    if s < 0 and -s < server_ms() then
      -- Its window passed: it loses its place, told, lest a client refused
      -- in its window sleep out a holder's lease untold.
      if redis.call(publish, Q.ch .. id_of(c), 'unlock') > 0 then
        told = told + 1
      end
      dequeue(Q, c)
      dropped = dropped + 1
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
      dropped = dropped + 1
      return true, true
    end
    told = told + 1
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
  -- After the walk: a new score moves its client, and ranks with it. In
  -- slices of score-client pairs: unpack is bounded by Lua's C stack.
  for i = 1, #windows, 1000 do
    redis.call('zadd', Q.key, 'XX', unpack(windows, i, math.min(i + 999, #windows)))
  end
  return n, first, told, dropped
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
