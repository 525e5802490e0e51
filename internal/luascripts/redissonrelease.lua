-- redissonrelease: drop one hold of a Redisson-format lock; at the last,
-- hand it to an heir or delete it and tell every waiter, Java or Go.
-- KEYS[1]  lock hash (redissonacquire.lua's)
-- KEYS[2]  the lock's channel "redisson_lock__channel:{name}"
-- KEYS[3]  token counter (redissonacquire.lua's)
-- ARGV[1..6]  release.lua's, but ARGV[3] "publish" or "spublish" (what the
--             Java clients subscribe with), and no heir's about
-- ARGV[7]  release.lua's ARGV[8]
-- Returns release.lua's reply; freed, it publishes Redisson's unlock "0"
-- and w is the subscribers reached. Retries go by the count (release_lock),
-- not Redisson's unlock-latch key.
local reply, shorter = release_lock(KEYS[1], KEYS[3], ARGV[1], tonumber(ARGV[2]), ARGV[4] == '1', ARGV[5] or '', ARGV[6], false, ARGV[7] == '1')
if shorter then
  redis.call(ARGV[3], KEYS[2], '0') -- the heir's lease ends first: ask again
end
if reply then
  return reply
end
return {0, redis.call(ARGV[3], KEYS[2], '0')}
