-- latchcountdown: take one from a count-down latch; at zero wake every
-- waiter, and keep the zero for a while (its tombstone).
-- KEYS[1]  latch hash (latchset.lua's)
-- KEYS[2]  the latch's channel, shared by every client
-- ARGV[1]  "p" or "s": PUBLISH or SPUBLISH (Redis 7 Cluster)
-- ARGV[2]  the payload that wakes every waiter (notify.WakeAllPayload)
-- Returns 1 when a count is left; at zero (published) 2 when a client
-- heard, else 0; -1 when the latch is not set (absent, or at zero: nothing
-- changed). Not the count, which Lua's doubles hold exactly only to 2^53.
local latch, channel = KEYS[1], KEYS[2]
local st = redis.call('hmget', latch, 'count', 'keep')
local count = tonumber(st[1])
if count == nil and redis.call('exists', latch) == 0 or count ~= nil and count <= 0 then
  return -1
end
write_first(latch)
local left = redis.call('hincrby', latch, 'count', -1)
if left > 0 then
  return 1
end
-- Zero. The hash stays, {count 0, round}, for the setter's retries (keep
-- ms, latchset's): a retry that found no latch would take itself for the
-- first run and set the count again, a latch nobody counts down. A hash
-- without keep (not one latchset writes) goes at once.
local keep = tonumber(st[2])
if keep and keep > 0 then
  redis.call('pexpire', latch, keep)
else
  redis.call('del', latch)
end
local publish = ARGV[1] == 's' and 'spublish' or 'publish'
if redis.call(publish, channel, ARGV[2]) > 0 then
  return 2
end
return 0
