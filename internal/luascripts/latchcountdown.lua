-- latchcountdown: take one from a count-down latch; at zero delete it and
-- wake every waiter.
--
-- KEYS[1]  latch hash           {count -> n, round -> id}, no expiry
-- KEYS[2]  the latch's channel  (same hash tag), shared by every client
-- ARGV[1]  "p" or "s": PUBLISH or SPUBLISH (Redis 7 Cluster)
-- ARGV[2]  the broadcast payload, which wakes every waiter of the channel in
--          each subscribed client (notify.WakeAllPayload)
--
-- Returns 1 when a count is left, 0 or 2 when this call reached zero (the
-- latch is deleted and ARGV[2] published once on KEYS[2]): 2 when the
-- publish reached a subscribed client, 0 when nobody listened; -1 when
-- there was no latch (nothing changed, nothing published). Not the count
-- left: Lua turns integers into doubles, which are exact only up to 2^53.
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
