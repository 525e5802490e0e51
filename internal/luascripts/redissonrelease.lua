-- redissonrelease: drop one hold of a Redisson-format lock; at the last,
-- hand it to an heir or delete it and tell every waiter, Java or Go.
--
-- KEYS[1]  lock hash            (see redissonacquire.lua)
-- KEYS[2]  the lock's channel   "redisson_lock__channel:{name}"
-- KEYS[3]  token counter        (see redissonacquire.lua)
-- ARGV[1]  owner id
-- ARGV[2]  the owner's hold count before this release
-- ARGV[3]  "publish" or "spublish": what the Java clients subscribe with
-- ARGV[4]  "1" if an earlier call with these arguments may have run
-- ARGV[5]  optional heir: a new owner id of the caller's client, given the
--          lock at the last hold instead of freeing it; "" or absent: none
-- ARGV[6]  the heir's lease in ms, with ARGV[5]
--
-- Returns {n, 0} with n >= 1 holds left; {0, r} freed, r the subscribers
-- the message reached (0 for a retry); {-1, 0} when the owner does not hold
-- with that count (nothing changed); {-3, token} handed to the heir.
--
-- A freed lock publishes "0", Redisson's unlock message. A retry is told
-- apart by the count, as release.lua does, not by Redisson's unlock-latch
-- key: owner ids are never reused, so the state an earlier run left is
-- nobody else's doing.
local lock, channel, tokens = KEYS[1], KEYS[2], KEYS[3]
local owner, n, retry, heir = ARGV[1], tonumber(ARGV[2]), ARGV[4] == '1', ARGV[5] or ''
local count = tonumber(redis.call('hget', lock, owner))
if count ~= n then
  if retry and n > 1 and count == n - 1 then
    return {n - 1, 0}
  end
  if retry and n == 1 and count == nil then
    if heir ~= '' and redis.call('hexists', lock, heir) == 1 then
      return {-3, tonumber(redis.call('get', tokens)) or 0}
    end
    return {0, 0}
  end
  return {-1, 0}
end
if n > 1 then
  return {redis.call('hincrby', lock, owner, -1), 0}
end
redis.call('del', lock)
if heir ~= '' then
  local token = redis.call('incr', tokens)
  redis.call('hset', lock, heir, 1)
  redis.call('pexpire', lock, ARGV[6])
  return {-3, token}
end
return {0, redis.call(ARGV[3], channel, '0')}
