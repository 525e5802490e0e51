-- latchset: give a count-down latch its count, unless it has one.
-- KEYS[1]  latch hash {count -> n, round -> id}, no expiry
-- ARGV[1]  the count, an integer > 0 (the caller checks it)
-- ARGV[2]  the round id: new for every call, so that a waiter can tell
--          this round from an earlier one, and a retry of a call whose
--          reply was lost finds its own round
-- Returns 1 when the count was set (the latch was absent, or had a count
-- <= 0, which only another writer leaves), or was set by this call already
-- (its round is ARGV[2]); 0 when it has another call's count.
local latch = KEYS[1]
local st = redis.call('hmget', latch, 'count', 'round')
local count = tonumber(st[1])
if count ~= nil and count > 0 then
  if st[2] == ARGV[2] then
    return 1
  end
  return 0
end
redis.call('del', latch)
redis.call('hset', latch, 'count', ARGV[1], 'round', ARGV[2])
return 1
