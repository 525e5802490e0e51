-- rwqueue: the prelude of the RWMutex scripts (after queue.lua's and
-- leases.lua's).
--
-- An RWMutex with base key B has: B:w, the write hold {owner -> count} with
-- the lease as its expiry and the grant's record in the field "#rec"; its
-- read side (leases.lua): B:rd {owner -> count}, B:rd:e, B:rd:rec. Clients
-- queue in B:qr (readers) and B:qw (writers), described in B:qr:d and
-- B:qw:d, listen on B:ch:r:<client> and B:ch:w:<client>, and keep their
-- entry until granted or gone.
--
-- Every script but rwreenter gets the same KEYS (rwwrite one more, its
-- fencing counter B:fence):
--   KEYS[1] B:w    KEYS[2] B:rd    KEYS[3] B:rd:e    KEYS[4] B:rd:rec
--   KEYS[5] B:qr   KEYS[6] B:qr:d  KEYS[7] B:qw      KEYS[8] B:qw:d
-- and B itself as ARGV[1], for the channels (which are not keys).
local w, qr, qrd, qw, qwd = KEYS[1], KEYS[5], KEYS[6], KEYS[7], KEYS[8]
local readers = {counts = KEYS[2], leases = KEYS[3], records = KEYS[4]}

-- live_readers drops the dead readers and returns how many are left and the
-- time left of the first of their leases to end (-1: none).
local function live_readers()
  local now = server_ms()
  drop_lapsed(readers, now)
  local n = redis.call('hlen', readers.counts)
  if n == 0 then
    return 0, -1
  end
  return n, first_end(readers, now)
end

-- rw_wake tells the clients whom a free write side can now admit: every
-- reader queued before the first queued writer, or, when there is none and
-- nreaders is 0, that writer. A client that no longer listens is dropped.
-- It returns how many it woke.
local function rw_wake(base, spec, nreaders)
  local publish = publisher(spec)
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
      dequeue(qr, qrd, client)
    end
  end
  if woken > 0 or nreaders > 0 then
    return woken
  end
  while true do
    local first = redis.call('zrange', qw, 0, 0)[1]
    if first == nil then
      return 0
    end
    if redis.call(publish, base .. ':ch:w:' .. first, 'unlock') > 0 then
      return 1
    end
    dequeue(qw, qwd, first)
  end
end

-- rw_prod is a refusal's wait when nothing holds yet clients queued ahead
-- of the caller wait: they should be acting, so it wakes them (which also
-- drops those that stopped listening) and the caller waits for a message
-- (-1: no bound of its own).
local function rw_prod(base, spec)
  rw_wake(base, spec, 0)
  return -1
end
