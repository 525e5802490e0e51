-- redissonreenter: an owner that holds a Redisson-format lock takes one
-- more hold.
--
-- KEYS[1]  lock hash            (see redissonacquire.lua)
-- KEYS[2]  token counter        (see redissonacquire.lua)
-- ARGV[1]  owner id
--
-- Returns the owner's new hold count, or 0 when it holds none (nothing
-- changed). The counter is raised as RFencedLock raises it at a re-entry,
-- so that both sides count grants alike; the expiry is left to the hold's
-- keeper, as latchkey's own re-entries leave it.
local lock, tokens, owner = KEYS[1], KEYS[2], ARGV[1]
if redis.call('hexists', lock, owner) == 0 then
  return 0
end
redis.call('incr', tokens)
return redis.call('hincrby', lock, owner, 1)
