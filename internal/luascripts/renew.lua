-- renew: extend a batch of leases in one call (the watchdog's tick).
--
-- KEYS[1..n]   the kept keys, in groups, all in one Cluster slot
-- ARGV[1]      lease in milliseconds (> 0)
-- ARGV[2..n+1] for each key, in the same order, one of:
--              an owner id: the key is a hash in which that owner holds a
--                field; it starts a group;
--              "": the key follows the group's first (a lock's holder
--                record, a side's records): renewed when the group is held;
--              "#rec": the key follows the group's first, as "" does, and
--                is a record of the hold (a Mutex's holder record): its
--                expiry goes to at least 3 times the lease, so that the
--                watchdog need not send it with every renewal
--                (luascripts.RecordLeases);
--              "#lease": the key is the group's lease set, a sorted set
--                {owner -> the end of its lease, server ms} (leases.lua):
--                the group is held only while its owner's score there has
--                not passed, and renewing moves that score to now + lease.
--
-- Returns an array of n integers: 1 when that key's group is held (each of
-- its keys' expiry is now at least the lease), 0 when it is not (nothing of
-- the group changed). The ownership check stops a renewal in flight from
-- reviving a lock released a moment before, or a lease that ran out while
-- its keys lived on for others. The checks use pcall: a key overwritten with
-- another type (WRONGTYPE) costs its own group, not the batch.
local lease = tonumber(ARGV[1])
local out = {}
-- extend gives key an expiry of at least lease, never a shorter one (a
-- side's keys live as long as its longest lease): Redis 7 does it in one
-- command (GT), older servers read the PTTL first. It is most of a tick's
-- cost at a million locks.
local extend = function(key, ms)
  if redis.call('pttl', key) < ms then
    redis.call('pexpire', key, ms)
  end
end
if redis.REDIS_VERSION_NUM and redis.REDIS_VERSION_NUM >= 0x070000 then
  extend = function(key, ms)
    redis.call('pexpire', key, ms, 'GT')
  end
end
local now -- server time, read at the first lease set
local first = 1
while first <= #KEYS do
  local owner = ARGV[first + 1]
  local held = redis.pcall('hexists', KEYS[first], owner) == 1
  local last = first
  while ARGV[last + 2] == '' or ARGV[last + 2] == '#rec' or ARGV[last + 2] == '#lease' do
    last = last + 1
    if held and ARGV[last + 1] == '#lease' then
      now = now or server_ms()
      held = (tonumber(redis.pcall('zscore', KEYS[last], owner)) or -1) >= now
    end
  end
  for i = first, last do
    if held then
      if ARGV[i + 1] == '#lease' then
        redis.call('zadd', KEYS[i], 'XX', 'GT', now + lease, owner)
      end
      if ARGV[i + 1] == '#rec' then
        extend(KEYS[i], 3 * lease)
      else
        extend(KEYS[i], lease)
      end
      out[i] = 1
    else
      out[i] = 0
    end
  end
  first = last + 1
end
return out
