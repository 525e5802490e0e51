-- leases: the prelude of renew and of the sides whose holds share keys
-- (an RWMutex's readers, a Semaphore's holders; docs/design.md, "RWMutex").
-- A side is {counts = {owner -> count}, leases = ZSET {owner -> lease end,
-- server ms}, records = {owner -> record}}: an owner is in all three or
-- none, dead once its lease passed; the keys expire with the longest lease.

-- check_types reads each of the side's keys as the type latchkey keeps
-- there (HLEN, ZCARD: TYPE is not in the minimal ACL grant), so that one
-- of another type stops the script with Redis' WRONGTYPE here: at the top
-- of an acquire, before it writes anything (a grant writes the count, the
-- lease and the record one after the other, and a count left without its
-- lease would block writers for ever), so that the caller's ErrWrongType
-- owes no undo; and in a describe, which reads a free side's counts and
-- records no further, so that Inspect and List report it as damage.
local function check_types(side)
  redis.call('hlen', side.counts)
  redis.call('zcard', side.leases)
  redis.call('hlen', side.records)
end

-- lease_start gives owner, whose count the caller has set, a lease of lease
-- ms and its record, and has the side's keys expire with the longest lease.
local function lease_start(side, owner, now, lease, record)
  redis.call('zadd', side.leases, now + lease, owner)
  redis.call('hset', side.records, owner, record)
  local longest = redis.call('zrange', side.leases, -1, -1, 'WITHSCORES')[2]
  for _, key in ipairs({side.counts, side.leases, side.records}) do
    redis.call('pexpireat', key, longest)
  end
end

-- lease_end drops owner's lease and record; the caller drops its count.
local function lease_end(side, owner)
  redis.call('zrem', side.leases, owner)
  redis.call('hdel', side.records, owner)
end

-- lease_live reports whether owner holds a lease that has not run out.
local function lease_live(side, owner, now)
  local score = redis.call('zscore', side.leases, owner)
  return score and tonumber(score) >= now
end

-- drop_lapsed drops every owner whose lease ran out before now. A side
-- whose counts hash keeps a running total (side.total, a field name: a
-- Semaphore's "#held") has the dead owners' counts taken off it; one
-- without (an RWMutex's readers) pays nothing for that.
local function drop_lapsed(side, now)
  local before = string.format('(%d', now)
  local dead = redis.call('zrangebyscore', side.leases, '-inf', before)
  if #dead > 0 then
    -- In slices: unpack is bounded by Lua's C stack (the usual count is one).
    for i = 1, #dead, 1000 do
      local j = math.min(i + 999, #dead)
      if side.total then
        -- Only fields still there count (one gone was taken off already),
        -- and while they are there the hash exists: no total outlives it.
        local gone = 0
        for _, n in ipairs(redis.call('hmget', side.counts, unpack(dead, i, j))) do
          gone = gone + (tonumber(n) or 0)
        end
        if gone ~= 0 then
          write_first(side.counts)
          redis.call('hincrby', side.counts, side.total, -gone)
        end
      end
      redis.call('hdel', side.counts, unpack(dead, i, j))
      redis.call('hdel', side.records, unpack(dead, i, j))
    end
    redis.call('zremrangebyscore', side.leases, '-inf', before)
  end
end

-- first_end is the ms left of the side's first lease to end (-1: none),
-- how long a refusal may last without a message, and its holder's record.
local function first_end(side, now)
  local first = redis.call('zrange', side.leases, 0, 0, 'WITHSCORES')
  if first[2] == nil then
    return -1, ''
  end
  return tonumber(first[2]) - now, redis.call('hget', side.records, first[1])
end
