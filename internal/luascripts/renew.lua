-- renew: extend a batch of leases in one call (the watchdog's tick).
-- KEYS[1..n]   the kept keys, in groups, all in one Cluster slot
-- ARGV[1]      lease in ms (> 0)
-- ARGV[2..n+1] per key: an owner id (the key is a hash where that owner
--              holds a field; it starts a group); "" (the key follows the
--              group's first: renewed when the group is held); "#lease"
--              (the group's lease set, leases.lua: the group is held only
--              while its owner's score has not passed; renewing moves it
--              to now + lease).
-- Returns n integers: 1 when that key's group is held (each of its keys'
-- expiry is now at least the lease), 0 when not (nothing of it changed):
-- a renewal in flight must not revive a lock released a moment before, or
-- a lease that ran out while its keys lived on for others. pcall: a key of
-- another type costs its own group, not the batch. Per-key cost rules a
-- tick: globals are looked up once, the lease passed to PEXPIRE as text (a
-- number is formatted per call; docs/design.md, "The watchdog").
local KEYS, ARGV = KEYS, ARGV
local call, pcall = redis.call, redis.pcall
local lease, lease_ms = tonumber(ARGV[1]), ARGV[1]
-- Redis 7: PEXPIRE GT never shortens (a side's keys live as long as its
-- longest lease); older servers read the PTTL first.
local gt = redis.REDIS_VERSION_NUM and redis.REDIS_VERSION_NUM >= 0x070000
local out = {}
local now -- server time, read at the first lease set
local first = 1
while first <= #KEYS do
  local owner = ARGV[first + 1]
  local held = pcall('hexists', KEYS[first], owner) == 1
  local last = first
  local mark = ARGV[last + 2]
  while mark == '' or mark == '#lease' do
    last = last + 1
    if held and mark == '#lease' then
      now = now or server_ms()
      held = (tonumber(pcall('zscore', KEYS[last], owner)) or -1) >= now
    end
    mark = ARGV[last + 2]
  end
  local v = 0
  if held then
    v = 1
    for i = first, last do
      local key = KEYS[i]
      if ARGV[i + 1] == '#lease' then
        call('zadd', key, 'XX', 'GT', now + lease, owner)
      end
      if gt then
        call('pexpire', key, lease_ms, 'GT')
      elseif call('pttl', key) < lease then
        call('pexpire', key, lease_ms)
      end
    end
  end
  for i = first, last do
    out[i] = v
  end
  first = last + 1
end
return out
