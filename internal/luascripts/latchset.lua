-- latchset: give a count-down latch its count, unless it has one.
-- KEYS[1]  latch hash {count -> n, round -> id, keep -> ms}, no expiry
--          while set (latchcountdown.lua's tombstone at zero)
-- ARGV[1]  the count, an integer > 0 (the caller checks it)
-- ARGV[2]  the round id: new for every call, so that a waiter can tell
--          this round from an earlier one, and a retry of a call whose
--          reply was lost finds its own round
-- ARGV[3]  how long (ms, > 0) the round's zero is kept: the bound of the
--          caller's retries of this call
-- Returns 1 when the count was set (the latch was absent, or had a count
-- <= 0: counted down to zero), or was set by this call already (its round
-- is ARGV[2], counted down to zero or not); 0 when it has another call's
-- count.
local latch = KEYS[1]
local st = redis.call('hmget', latch, 'count', 'round')
if st[2] == ARGV[2] then
  -- A retry: its round may have reached zero since, which it must not undo.
  return 1
end
local count = tonumber(st[1])
if count ~= nil and count > 0 then
  return 0
end
redis.call('del', latch)
redis.call('hset', latch, 'count', ARGV[1], 'round', ARGV[2], 'keep', ARGV[3])
return 1
