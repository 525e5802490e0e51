-- redissonacquire: a new owner takes a lock kept in Redisson's RLock format,
-- or learns how long to wait (see redisson.go).
-- KEYS[1]  lock hash {"<client uuid>:<n>" -> hold count}, the lock's name
-- KEYS[2]  token counter "redisson_lock_token:{name}" (RFencedLock's)
-- ARGV[1]  lease in ms (> 0)    ARGV[2]  owner id
-- Returns {1, token}, else {0, pttl, 0, ''} (queue.lua's refusal). Granted
-- by Redisson's rule, the hash absent or the caller's field in it, so Java
-- clients take it alike; the counter rises at every grant, as RFencedLock's.
local lock, tokens = KEYS[1], KEYS[2]
local lease, owner = ARGV[1], ARGV[2]
if redis.call('exists', lock) == 0 or redis.call('hexists', lock, owner) == 1 then
  local token = redis.call('incr', tokens)
  redis.call('hincrby', lock, owner, 1)
  redis.call('pexpire', lock, lease)
  return {1, token}
end
return {0, redis.call('pttl', lock), 0, ''}
