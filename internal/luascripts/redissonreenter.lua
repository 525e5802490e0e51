-- redissonreenter: an owner that holds a Redisson-format lock takes one
-- more hold.
-- KEYS[1..2]  redissonacquire.lua's
-- ARGV[1]  owner id
-- Returns the new hold count, or 0 when the owner holds none (nothing
-- changed). The counter rises as RFencedLock's does at a re-entry; the
-- expiry is left to the hold's keeper, as reenter.lua leaves it.
local lock, tokens, owner = KEYS[1], KEYS[2], ARGV[1]
if redis.call('hexists', lock, owner) == 0 then
  return 0
end
write_first(lock) -- counts only: see reenter.lua
redis.call('incr', tokens)
return redis.call('hincrby', lock, owner, 1)
