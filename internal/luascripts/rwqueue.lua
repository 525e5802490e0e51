-- rwqueue: the prelude of the RWMutex scripts (after queue.lua's and
-- leases.lua's).
--
-- An RWMutex with base key B has: B:w, the write hold {owner -> count} with
-- the lease as its expiry and the grant's record in the field "#rec"; its
-- read side (leases.lua): B:rd {owner -> count}, B:rd:e, B:rd:rec. Clients
-- queue in B:qr (readers) and B:qw (writers), described in B:qr:d and
-- B:qw:d, and listen on B:ch:r:<client> and B:ch:w:<client> (queue.lua).
--
-- Every script but rwreenter gets the same KEYS (rwwrite one more, its
-- fencing counter B:fence):
--   KEYS[1] B:w    KEYS[2] B:rd    KEYS[3] B:rd:e    KEYS[4] B:rd:rec
--   KEYS[5] B:qr   KEYS[6] B:qr:d  KEYS[7] B:qw      KEYS[8] B:qw:d
-- and B itself as ARGV[1] (but rwdescribe), for the channels (which are not
-- keys).
--
-- The admission rule: a reader while nobody writes and no writer is queued
-- before it; a writer while nobody holds and no client is queued before it.
-- So a free write side admits every reader queued before the first writer,
-- or, when there is none and no reader holds, that writer (rw_wake).
local w = KEYS[1]
local R = {key = KEYS[5], desc = KEYS[6], ch = (ARGV[1] or '') .. ':ch:r:'}
local W = {key = KEYS[7], desc = KEYS[8], ch = (ARGV[1] or '') .. ':ch:w:'}
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

-- first_writer is the score of the first queued writer that may still
-- come (a woken one whose window passed is dropped), or nil.
local function first_writer()
  local before
  wake(W, 'p0', 0, function(_, s) before = s end)
  return before
end

-- rw_wake wakes whom a free write side admits, up to stop (the caller):
-- nreaders is how many read holds there are. It returns wake's count and
-- first window end.
local function rw_wake(spec, nreaders, stop)
  local before = first_writer()
  local n, first = wake(R, spec, math.huge, function(_, s)
    if before == nil or s < before then
      return 0
    end
  end, stop)
  if n > 0 or nreaders > 0 then
    return n, first
  end
  return wake(W, spec, 1, one, stop)
end
