-- queue: the prelude of every script that queues, wakes or describes
-- waiting clients: one fairness protocol for every kind.
--
-- A wait queue is a table {key = ZSET {client id -> server time queued,
-- us}, desc = its description hash {client id -> description}, ch = the
-- prefix of its clients' channels, "<ch><client id>"}. A queued client
-- keeps its entry until it is granted or leaves. A kind's acquire admits a
-- caller when its capacity rule admits it counting the clients queued before
-- it (a caller not queued is behind everyone); wake walks the queue oldest
-- first while the rule admits and tells those clients, dropping a client
-- nobody listens for (PUBLISH counts receivers). A client told gets a wake
-- window (the wake spec's ms): its score becomes minus the window's end,
-- server ms, which keeps it before every client not woken. One whose window
-- passed loses its place to whichever script walks the queue next, so a
-- woken client that never comes (a frozen process still subscribed) keeps
-- a free lock from the others for one window at most. The description hash
-- has the queue's expiry; every script dequeues through dequeue, so an entry
-- and its description go together. Callers pass the keys: the helpers build
-- no key names.

-- enqueue puts client at the back of Q unless it is queued (NX: it keeps
-- its place), and keeps the queue the wait (ms) the client was told and 10 s
-- more: it outlives every bounded wait, but not an abandoned lock. When it
-- must extend it, it adds 10 s more again, so that the waiters refused in
-- the next 10 s with no longer a wait need no PEXPIRE (two per refusal
-- otherwise: the queue's and its description's). wait may be a function
-- of the client's rank (a refusal whose wait depends on the place). about
-- is the caller's "<ms>|<description>" (record.lua), or nil. With fresh the
-- caller knows Q does not exist: its ZADD makes it, the client is alone in
-- it (no ZRANK) and it has no expiry yet (no PTTL). It returns the
-- client's rank and the wait.
local function enqueue(Q, client, wait, about, fresh)
  local added = redis.call('zadd', Q.key, 'NX', server_us(), client) == 1
  local rank, left = 0, -1
  if not fresh then
    rank = redis.call('zrank', Q.key, client)
    left = redis.call('pttl', Q.key)
  end
  if type(wait) == 'function' then
    wait = wait(rank)
  end
  local ttl = math.max(wait, 0) + 10000
  local extended = left < ttl
  if extended then
    left = ttl + 10000
    redis.call('pexpire', Q.key, left)
  end
  if added and about then
    local bar = string.find(about, '|', 1, true)
    if bar and bar < #about then
      redis.call('hset', Q.desc, client, string.sub(about, bar + 1))
    end
  end
  if added or extended then
    redis.call('pexpire', Q.desc, left)
  end
  return rank, wait
end

-- refused is every acquire's refusal {0, wait, place, record}: wait is
-- how long (ms) the state may last without a message (-1: no bound); a
-- caller that waits is queued first and told its place in Q (1: next; 0
-- when not queued); record is the holder's (record.lua) or ''. They ride
-- on the reply a refusal costs anyway, so that a waiter that gives up can
-- say who blocked it without another round trip. wait and fresh are
-- enqueue's (a function only for a caller that queues).
local function refused(queued, Q, client, wait, about, record, fresh)
  local place = 0
  if queued then
    local rank
    rank, wait = enqueue(Q, client, wait, about, fresh)
    place = rank + 1
  end
  return {0, wait, place, record or ''}
end

-- dequeue takes client off Q: 1 when it was queued, else 0. A queue with
-- wants (a Semaphore's {client -> permits}) loses the client's too, and
-- the whole hash with its last client.
local function dequeue(Q, client)
  redis.call('hdel', Q.desc, client)
  local removed = redis.call('zrem', Q.key, client)
  if Q.wants then
    redis.call('hdel', Q.wants, client)
    if redis.call('exists', Q.key) == 0 then
      redis.call('del', Q.wants)
    end
  end
  return removed
end

-- publisher is the command of a wake spec: "p" (PUBLISH) or "s" (SPUBLISH,
-- Cluster), then the wake window in ms (0: none; one argument, not two,
-- keeps the hot path's calls short).
local function publisher(spec)
  if string.sub(spec, 1, 1) == 's' then
    return 'spublish'
  end
  return 'publish'
end

-- wake walks Q oldest first, up to stop (the caller, which acts for
-- itself), admitting clients while their weights (weigh(client, score); nil
-- stops the walk) fit in room. An admitted client in its window counts and
-- is not told again (a prod must not stretch a window); one whose window
-- passed is dropped; any other is told, and dropped if nobody listens, or
-- given a window. With tell, the first client that does not fit is told
-- too, without a window: a publish is the only way to learn that it still
-- listens, and a dead client must not block those behind it. It returns
-- how many it admitted and the first end of their windows (server ms; nil
-- when none has one).
local function wake(Q, spec, room, weigh, stop, tell)
  local publish, window = publisher(spec), tonumber(string.sub(spec, 2))
  local used, n, first, windows = 0, 0, nil, {}
  -- visit handles one client: false ends the walk; gone, it was dropped.
  local function visit(c, s)
    if c == stop then
      return false
    end
    if s < 0 and -s < server_ms() then
      dequeue(Q, c) -- its window passed: it lost its place
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
    if redis.call(publish, Q.ch .. c, 'unlock') == 0 then
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
  local at, page, more = 0, 1, true
  repeat
    local e = redis.call('zrange', Q.key, at, at + page - 1, 'WITHSCORES')
    more = #e == 2 * page
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
  until not more or n > 0 and used >= room and not tell
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
-- hold's end (pttl, -1 for none): -1 only when neither can end it.
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

-- woken_of is the client of Q whose window is open and ends last, or nil
-- (describe: the client a free lock is kept for).
local function woken_of(Q)
  return redis.call('zrangebyscore', Q.key, '-inf', '(' .. -server_ms(), 'LIMIT', 0, 1)[1]
end

-- unwake drops Q's woken clients, in their window or past it, and returns
-- how many (a force-unlock: told, they have not come, and may never).
local function unwake(Q)
  local woken = redis.call('zrangebyscore', Q.key, '-inf', '(0')
  for _, c in ipairs(woken) do
    dequeue(Q, c)
  end
  return #woken
end

-- release_count drops one of owner's holds in hash, whose count the caller
-- knows is n. With retry, the state an earlier run would have left (the
-- count one lower, the owner gone) is taken as its doing: owner ids are
-- never reused. It returns the holds left, or -1 when owner does not hold
-- with that count, and whether an earlier run did it (both: nothing
-- changed). At 0 the field is gone, unless keep (the caller deletes the hash).
local function release_count(hash, owner, n, retry, keep)
  local count = tonumber(redis.call('hget', hash, owner))
  if count ~= n then
    if retry and ((n > 1 and count == n - 1) or (n == 1 and count == nil)) then
      return n - 1, true
    end
    return -1, false
  end
  if n > 1 then
    return redis.call('hincrby', hash, owner, -1), false
  end
  if not keep then
    redis.call('hdel', hash, owner)
  end
  return 0, false
end

-- The describe scripts (Inspect's) all reply {holds, queues, size,
-- woken}: holds {mode, owner, count, ms left (-1: no expiry), record or
-- "", ...} (hold_entry), queues {queue_head, ...}, size a Semaphore's (0
-- for the others), woken a client whose wake window is open (woken_of), or
-- "". mode is an RWMutex's "read" or "write", "" for the other kinds.

-- hold_entry appends one hold to a describe reply's holds.
local function hold_entry(out, mode, owner, count, left, record)
  for _, v in ipairs({mode, owner, count, left, record}) do
    out[#out + 1] = v
  end
end

-- hash_holds appends the holds of hash, {owner -> count} with one lease
-- (its expiry) and one record (a Mutex's, a write hold's), to out. Fields
-- starting with '#' are not owners.
local function hash_holds(out, mode, hash, record)
  local kv = redis.call('hgetall', hash)
  local left = redis.call('pttl', hash)
  for i = 1, #kv, 2 do
    if string.sub(kv[i], 1, 1) ~= '#' then
      hold_entry(out, mode, kv[i], kv[i + 1], left, record)
    end
  end
end

-- queue_head describes Q for Inspect: {mode, {client, score, ...}, total,
-- {description or false, ...}, {permits wanted, ...}} for the oldest max
-- clients (a score is the time queued, us, or a woken client's minus its
-- window's end, ms). The wants come from wants, a Semaphore's hash, read as
-- its scripts read it (none for the other kinds).
local function queue_head(mode, Q, max, wants)
  local head = redis.call('zrange', Q.key, 0, tonumber(max) - 1, 'WITHSCORES')
  local ids = {}
  for i = 1, #head, 2 do
    ids[#ids + 1] = head[i]
  end
  local descs, want = {}, {}
  if #ids > 0 then
    descs = redis.call('hmget', Q.desc, unpack(ids))
    if wants then
      for i, w in ipairs(redis.call('hmget', wants, unpack(ids))) do
        want[i] = tonumber(w) or 1
      end
    end
  end
  return {mode, head, redis.call('zcard', Q.key), descs, want}
end
-- foreign returns the first of KEYS that holds another type than types
-- says latchkey keeps there (a letter per key: h hash, z sorted set, s
-- string, - no key), or nil. The force-unlock scripts check first, so that
-- they delete nothing latchkey did not write (an application's key under
-- the same prefix, say). A read of the right type fails on any other.
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
