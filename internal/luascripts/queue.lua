-- queue: the prelude of the scripts that queue waiting clients or wake them.
--
-- A wait queue is a ZSET {client id -> server time queued}, oldest first; a
-- queued client listens on "<channel>:<client id>". Freeing a Mutex pops
-- clients and publishes to each until one has a subscriber (PUBLISH counts
-- receivers), and reserves the lock for it ("<lock>:r", PX) so that nobody
-- barges in before the wake-up arrives. Each queue has a description hash
-- {client id -> description} for Inspect, with the queue's expiry; every
-- script dequeues through dequeue, so an entry and its description go
-- together. Callers pass both keys: the helpers build no key names.

-- enqueue puts client at the back of queue unless it is queued (NX: it keeps
-- its place), and keeps the queue the wait (ms) the client was told and 10 s
-- more: it outlives every TTL-bounded wait, but not an abandoned lock. about
-- is the caller's "<ms>|<description>" (record.lua), or nil.
local function enqueue(queue, desc, client, wait, about)
  local ttl = math.max(wait, 0) + 10000
  local now = redis.call('time')
  local added = redis.call('zadd', queue, 'NX', now[1] * 1000000 + now[2], client) == 1
  local left = redis.call('pttl', queue)
  local extended = left < ttl
  if extended then
    redis.call('pexpire', queue, ttl)
    left = ttl
  end
  if added and about then
    local bar = string.find(about, '|', 1, true)
    if bar and bar < #about then
      redis.call('hset', desc, client, string.sub(about, bar + 1))
    end
  end
  if added or extended then
    redis.call('pexpire', desc, left)
  end
end

-- refused is every acquire's refusal {0, wait, reserved, place, record}:
-- a caller that waits is queued first and told its place in queue (1:
-- next; 0 when not queued); record is the holder's (record.lua) or ''.
-- They ride on the reply a refusal costs anyway, so that a waiter that
-- gives up can say who blocked it without another round trip.
local function refused(queued, queue, desc, client, wait, about, reserved, record)
  local place = 0
  if queued then
    enqueue(queue, desc, client, wait, about)
    place = redis.call('zrank', queue, client) + 1
  end
  return {0, wait, reserved and 1 or 0, place, record or ''}
end

-- dequeue takes client off queue and desc: 1 when it was queued, else 0.
local function dequeue(queue, desc, client)
  redis.call('hdel', desc, client)
  return redis.call('zrem', queue, client)
end

-- publisher is the command of a wake spec: "p" (PUBLISH) or "s" (SPUBLISH,
-- Cluster), then the Mutex's reservation window in ms (others ignore it).
local function publisher(spec)
  if string.sub(spec, 1, 1) == 's' then
    return 'spublish'
  end
  return 'publish'
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

-- wake publishes to the oldest queued client that still listens and
-- reserves the free lock for it for spec's window (0: none; one argument, not
-- two, keeps the hot path's calls short). It returns the client, or nil.
local function wake(queue, desc, channel, reservation, spec)
  local publish = publisher(spec)
  local window = tonumber(string.sub(spec, 2))
  while true do
    local head = redis.call('zpopmin', queue)
    if head[1] == nil then
      return nil
    end
    redis.call('hdel', desc, head[1])
    if redis.call(publish, channel .. ':' .. head[1], 'unlock') > 0 then
      if window > 0 then
        redis.call('set', reservation, head[1], 'PX', window)
      end
      return head[1]
    end
  end
end

-- The describe scripts (Inspect's) all reply {holds, queues, size,
-- reserved}: holds {mode, owner, count, ms left (-1: no expiry), record or
-- "", ...} (hold_entry), queues {queue_head, ...}, size a Semaphore's (0
-- for the others), reserved the client a free Mutex is kept for, or "".
-- mode is an RWMutex's "read" or "write", "" for the other kinds.

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

-- queue_head describes queue (whose description hash is desc) for Inspect:
-- {mode, {client, queued at (us), ...}, total, {description or false, ...},
-- {permits wanted, ...}} for the oldest max clients. The wants come from
-- wants, a Semaphore's hash, read as its scripts read it (none for the
-- other kinds).
local function queue_head(mode, queue, desc, max, wants)
  local head = redis.call('zrange', queue, 0, tonumber(max) - 1, 'WITHSCORES')
  local ids = {}
  for i = 1, #head, 2 do
    ids[#ids + 1] = head[i]
  end
  local descs, want = {}, {}
  if #ids > 0 then
    descs = redis.call('hmget', desc, unpack(ids))
    if wants then
      for i, w in ipairs(redis.call('hmget', wants, unpack(ids))) do
        want[i] = tonumber(w) or 1
      end
    end
  end
  return {mode, head, redis.call('zcard', queue), descs, want}
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
