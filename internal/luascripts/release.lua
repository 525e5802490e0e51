-- release: drop one hold of the reentrant lock; at zero, delete it and wake a waiter.
--
-- KEYS[1]  lock hash            {owner id -> hold count}
-- KEYS[2]  the lock's channel   (same hash tag as KEYS[1], so same Cluster slot)
-- ARGV[1]  owner id
-- ARGV[2]  "s" to notify with SPUBLISH (Cluster, sharded pub/sub), anything else PUBLISH
-- ARGV[3]  expected hold count, or "0" for any. With a number n > 0 the release
--          happens only if the caller's count is exactly n: this is how an
--          acquisition whose reply was lost is undone without touching the
--          holds the caller already had.
--
-- Returns  -1  the caller does not hold the lock (nothing changed, nothing published)
--          -2  the caller holds it, but not with the expected count (nothing changed)
--           0  released: the key is gone and one message was published
--           n  still held by the caller with n holds left
local key, channel, owner = KEYS[1], KEYS[2], ARGV[1]
local expected = tonumber(ARGV[3])
local count = tonumber(redis.call('hget', key, owner))
if count == nil then
  return -1
end
if expected ~= nil and expected > 0 and count ~= expected then
  return -2
end
if count > 1 then
  return redis.call('hincrby', key, owner, -1)
end
redis.call('del', key)
if ARGV[2] == 's' then
  redis.call('spublish', channel, 'unlock')
else
  redis.call('publish', channel, 'unlock')
end
return 0
