-- rwqueue: the prelude of the RWMutex scripts (after queue.lua's and
-- leases.lua's); keys and rules: docs/design.md, "RWMutex". With base key B,
-- every script but rwreenter gets the KEYS
--   KEYS[1] B:w    KEYS[2] B:rd    KEYS[3] B:rd:e    KEYS[4] B:rd:rec
--   KEYS[5] B:qr   KEYS[6] B:qw
-- (rwwrite a seventh, B:fence), and B as ARGV[1] (but rwdescribe) for the
-- channels B:ch:r:<client> and B:ch:w:<client>. A reader is admitted while
-- nobody writes and no writer is queued before it; a writer while nobody
-- holds and no client is queued before it.
local w = KEYS[1]
local R = {key = KEYS[5], ch = (ARGV[1] or '') .. ':ch:r:'}
local W = {key = KEYS[6], ch = (ARGV[1] or '') .. ':ch:w:'}
local readers = {counts = KEYS[2], leases = KEYS[3], records = KEYS[4]}

-- write_hold is the write hold's PTTL and record, or -2 when nobody writes.
local function write_hold()
  local pttl = redis.call('pttl', w) -- -2: no such key
  if pttl ~= -2 then
    return pttl, redis.call('hget', w, '#rec')
  end
  return -2, nil
end

-- live_readers drops the dead readers and returns how many are left, and
-- first_end's wait and record (-1 and nil when none).
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
-- come (a woken one past its window is dropped, told with spec), or nil,
-- how many were told so and how many were dropped.
local function first_writer(spec)
  local before
  local _, _, told, dropped = wake(W, spec, 0, function(_, s) before = s end)
  return before, told, dropped
end

-- rw_wake wakes whom a free write side admits, nreaders being the read
-- holds, up to the caller's entry in its own queue (rstop in R, wstop in W):
-- a client has one entry string in both queues, and its entry in the other
-- queue is another waiter of its. before is first_writer's, if the caller
-- has it. It returns wake's count, first end and messages, the first
-- queued writer's score when it admitted nobody (nil: none), and how many
-- writers it dropped.
local function rw_wake(spec, nreaders, rstop, wstop, before)
  local told, dropped = 0, 0
  while true do
    if not before then
      local t, d
      before, t, d = first_writer(spec)
      told, dropped = told + t, dropped + d
    end
    -- rfirst is the first reader left queued: writers after it wait for it.
    local rfirst
    local n, first, t = wake(R, spec, math.huge, function(_, s)
      if before == nil or s < before then
        return 0
      end
      rfirst = s
    end, rstop)
    told = told + t
    if n > 0 or nreaders > 0 then
      return n, first, told, before, dropped
    end
    if not rfirst and rstop then
      rfirst = tonumber(redis.call('zscore', R.key, rstop))
    end
    local tried = 0
    local m, ends, u, d = wake(W, spec, 1, function(_, s)
      if rfirst == nil or s <= rfirst then
        tried = tried + 1
        return 1
      end
    end, wstop)
    told, dropped = told + u, dropped + d
    if m > 0 or tried == 0 then
      return m, ends, told, before, dropped
    end
    -- The writers before rfirst were dropped (none listened): the readers'
    -- turn may have come, which the first walk refused them.
    before = nil
  end
end

-- rw_refused is rwread's and rwwrite's refusal by Q (their own queue):
-- queue.lua's, with place() as the place when queued (it counts the clients
-- of both queues that the caller waits behind).
local function rw_refused(Q, client, queued, pttl, holder, place)
  local reply = refused(queued, Q, client, pttl, holder, pttl)
  if queued then
    reply[3] = place()
  end
  return reply
end
