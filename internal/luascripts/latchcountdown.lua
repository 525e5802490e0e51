-- latchcountdown: take one from a count-down latch; at zero delete it and
-- wake every waiter.
-- KEYS[1]  latch hash (latchset.lua's)
-- KEYS[2]  the latch's channel, shared by every client
-- ARGV[1]  "p" or "s": PUBLISH or SPUBLISH (Redis 7 Cluster)
-- ARGV[2]  the payload that wakes every waiter (notify.WakeAllPayload)
-- Returns 1 when a count is left; at zero (deleted, published) 2 when a
-- client heard, else 0; -1 without a latch (nothing changed). Not the
-- count, which Lua's doubles hold exactly only to 2^53.
local latch, channel = KEYS[1], KEYS[2]
if redis.call('exists', latch) == 0 then
  return -1
end
local left = redis.call('hincrby', latch, 'count', -1)
if left > 0 then
  return 1
end
redis.call('del', latch)
local publish = ARGV[1] == 's' and 'spublish' or 'publish'
if redis.call(publish, channel, ARGV[2]) > 0 then
  return 2
end
return 0
