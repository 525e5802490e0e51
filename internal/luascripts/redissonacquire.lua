-- redissonacquire: a new owner takes a lock kept in Redisson's RLock format,
-- or learns how long to wait (see redisson.go).
--
-- KEYS[1]  lock hash            {"<client uuid>:<n>" -> hold count}, the
--          lock's name itself
-- KEYS[2]  token counter        "redisson_lock_token:{name}" (RFencedLock's)
-- ARGV[1]  lease in ms (> 0)
-- ARGV[2]  owner id
--
-- Returns {1, token} when granted; refused, the shape of every acquire's
-- refusal (queue.lua's refused) {0, pttl, 0, 0, ''}: pttl -1 when the hash
-- has no expiry; no queue, so no place; no record of the holder.
--
-- The grant rule is Redisson's: the hash is absent, or the caller holds a
-- field in it. Nothing else marks the lock, so a Java client that finds it
-- free takes it as this script would. The counter is RFencedLock's, raised
-- at every grant whether or not the Java side fences.
local lock, tokens = KEYS[1], KEYS[2]
local lease, owner = ARGV[1], ARGV[2]
if redis.call('exists', lock) == 0 or redis.call('hexists', lock, owner) == 1 then
  local token = redis.call('incr', tokens)
  redis.call('hincrby', lock, owner, 1)
  redis.call('pexpire', lock, lease)
  return {1, token}
end
return {0, redis.call('pttl', lock), 0, ''}
