-- renew: extend a batch of leases in one call (the watchdog's tick).
--
-- KEYS[1..n]   lock hashes, all in one Cluster slot
-- ARGV[1]      lease in milliseconds (> 0)
-- ARGV[2..n+1] owner id for each key, in the same order
--
-- Returns an array of n integers: 1 when that owner still holds that lock (its
-- expiry is now at least the lease), 0 when it does not (nothing changed). The
-- ownership check is what stops a renewal in flight from reviving a lock that
-- was released a moment before.
local lease = tonumber(ARGV[1])
local out = {}
for i, key in ipairs(KEYS) do
  if redis.call('hexists', key, ARGV[i + 1]) == 1 then
    if redis.call('pttl', key) < lease then
      redis.call('pexpire', key, lease)
    end
    out[i] = 1
  else
    out[i] = 0
  end
end
return out
