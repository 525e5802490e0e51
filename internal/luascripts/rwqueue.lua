-- rwqueue: the prelude of the RWMutex scripts (after queue.lua's enqueue).
--
-- An RWMutex with base key B has: B:w, the write hold {owner -> count}
-- with the lease as its expiry; B:rd, the readers {owner -> count}, whose
-- expiry is the longest reader's; and per reader B:rd:<owner> {owner -> 1}
-- with that reader's own lease, so that a dead reader lapses alone. Waiting
-- clients queue in B:qr (readers) and B:qw (writers), scored by the server
-- time they queued at, and listen on B:ch:r:<client> and B:ch:w:<client>.
-- A client keeps its entry until it is granted or leaves.

-- live_readers drops the readers whose own key expired and returns how
-- many are left and the least PTTL among them (-1 when none expires).
local function live_readers(readers)
  local n, least = 0, -1
  for _, o in ipairs(redis.call('hkeys', readers)) do
    local p = redis.call('pttl', readers .. ':' .. o)
    if p == -2 then
      redis.call('hdel', readers, o)
    else
      n = n + 1
      if p >= 0 and (least < 0 or p < least) then
        least = p
      end
    end
  end
  return n, least
end

-- rw_wake tells the clients whom a free write side can now admit: every
-- reader queued before the first queued writer, or, when there is none
-- and no reader holds (nreaders 0), that writer. spec is "p" or "s"
-- (PUBLISH or SPUBLISH). A client that no longer listens is dropped. It
-- returns how many clients it woke.
local function rw_wake(base, spec, nreaders)
  local publish = 'publish'
  if string.sub(spec, 1, 1) == 's' then
    publish = 'spublish'
  end
  local qr, qw = base .. ':qr', base .. ':qw'
  local head = redis.call('zrange', qw, 0, 0, 'WITHSCORES')
  local before = '+inf'
  if head[1] then
    before = '(' .. head[2]
  end
  local woken = 0
  for _, client in ipairs(redis.call('zrangebyscore', qr, '-inf', before)) do
    if redis.call(publish, base .. ':ch:r:' .. client, 'unlock') > 0 then
      woken = woken + 1
    else
      dequeue(qr, qr .. ':d', client)
    end
  end
  if woken > 0 or nreaders > 0 then
    return woken
  end
  while true do
    local w = redis.call('zrange', qw, 0, 0)
    if w[1] == nil then
      return 0
    end
    if redis.call(publish, base .. ':ch:w:' .. w[1], 'unlock') > 0 then
      return 1
    end
    dequeue(qw, qw .. ':d', w[1])
  end
end

-- release_count drops one of owner's holds in hash, whose count the
-- caller says is n, as release.lua does (retry: an earlier call with
-- these arguments may have run). It returns the holds left, or -1 when
-- owner does not hold with that count; at 0 the field is gone.
local function release_count(hash, owner, n, retry)
  local count = tonumber(redis.call('hget', hash, owner))
  if count ~= n then
    if retry and ((n > 1 and count == n - 1) or (n == 1 and count == nil)) then
      return n - 1
    end
    return -1
  end
  if n > 1 then
    return redis.call('hincrby', hash, owner, -1)
  end
  redis.call('hdel', hash, owner)
  return 0
end
