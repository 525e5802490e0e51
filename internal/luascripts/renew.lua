-- renew: extend a batch of leases in one call (the watchdog's tick).
--
-- KEYS[1..n]   lock hashes, all in one Cluster slot
-- ARGV[1]      lease in milliseconds (> 0)
-- ARGV[2..n+1] owner id for each key, in the same order; "" for a key that
--              follows the key before it (a lock's holder record): renewed
--              when that key's owner holds it
--
-- Returns an array of n integers: 1 when that owner still holds that lock (its
-- expiry is now at least the lease), 0 when it does not (nothing changed). The
-- ownership check is what stops a renewal in flight from reviving a lock that
-- was released a moment before.
local lease = tonumber(ARGV[1])
local out = {}
local held = false
for i, key in ipairs(KEYS) do
  if ARGV[i + 1] ~= '' then
    held = redis.call('hexists', key, ARGV[i + 1]) == 1
  end
  if held then
    if redis.call('pttl', key) < lease then
      redis.call('pexpire', key, lease)
    end
    out[i] = 1
  else
    out[i] = 0
  end
end
return out
