-- semqueue: the prelude of the Semaphore scripts (after queue.lua's and
-- leases.lua's); keys and rules: docs/design.md, "Semaphore". With base
-- key B, every script gets the KEYS
--   KEYS[1] B:h   KEYS[2] B:h:e   KEYS[3] B:h:rec
--   KEYS[4] B:q   KEYS[5] B:qn
-- and B as ARGV[1] (but semavailable and semdescribe, which wake nobody)
-- for the channels B:ch:<client>. B:h and B:qn record "#size"; B:h keeps
-- "#held", the sum of its owners' permits, which every script that grants,
-- releases, drops or deletes holders keeps exact: none reads every holder.
-- n permits are granted iff the live held permits, n and the wants of the
-- clients queued before the caller (all, for one not queued) fit in the
-- size.
local h, qn = KEYS[1], KEYS[5]
local Q = {key = KEYS[4], wants = KEYS[5], ch = (ARGV[1] or '') .. ':ch:'}
local holders = {counts = KEYS[1], leases = KEYS[2], records = KEYS[3], total = '#held'}

-- sem_held drops the holders whose lease ran out before now and returns
-- the permits the others hold and the size B:h records. It deletes B:h
-- once no holder is left, whichever script drops the last: its "#size"
-- must not outlive them (B:qn keeps the size for waiters).
local function sem_held(now)
  drop_lapsed(holders, now)
  local v = redis.call('hmget', h, '#held', '#size')
  local held, size = tonumber(v[1]) or 0, tonumber(v[2])
  -- Only when no other field is left: no owner's field goes on the word
  -- of the total alone.
  if held == 0 and size and redis.call('hlen', h) == (v[1] and 2 or 1) then
    redis.call('del', h)
    return 0, nil
  end
  return held, size
end

-- sem_size is the size the semaphore is in use with, or nil: recorded,
-- sem_held's, else B:qn's.
local function sem_size(recorded)
  return recorded or tonumber(redis.call('hget', qn, '#size'))
end

-- want_of is what a queued client waits for.
local function want_of(client)
  return tonumber(redis.call('hget', qn, client)) or 1
end

-- sem_ahead returns the permits wanted by the clients queued before client
-- (all of them when it is not queued), and whether it is queued: O(those
-- clients), read in slices of one HMGET (unpack is bounded by Lua's C
-- stack).
local function sem_ahead(client)
  local rank = redis.call('zrank', Q.key, client)
  local clients = {}
  if not rank then
    clients = redis.call('zrange', Q.key, 0, -1)
  elseif rank > 0 then
    clients = redis.call('zrange', Q.key, 0, rank - 1)
  end
  local sum = 0
  for i = 1, #clients, 1000 do
    for _, w in ipairs(redis.call('hmget', qn, unpack(clients, i, math.min(i + 999, #clients)))) do
      sum = sum + (tonumber(w) or 1)
    end
  end
  return sum, rank ~= false
end

-- sem_free drops dead holders (settling B:h) and returns the free permits
-- of the recorded size, else of size.
local function sem_free(size, now)
  local held, recorded = sem_held(now)
  return (sem_size(recorded) or tonumber(size)) - held
end

-- sem_wake wakes the queued clients whose wants fit in free, oldest first,
-- up to stop (the caller), and tells the first that does not (queue.lua).
local function sem_wake(spec, free, stop)
  return wake(Q, spec, free, want_of, stop, true)
end
