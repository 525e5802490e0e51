-- claim: raise the fence to the caller's token before it reads, and return the value.
--
-- KEYS[1]  hash {token = highest written token, value, claim = highest claimed token}
-- ARGV[1]  the reader's fencing token (1 to 2^53-1, so tonumber is exact)
--
-- Returns {highest, value}: highest is max(token, claim) after the call, ARGV[1]
-- when the claim was accepted and a larger one when it was stale; value is the
-- current value ("" when none), returned only when the claim was accepted.
--
-- A write-only fence does not protect a read-modify-write: an old holder could
-- write between the new holder's read and its write, and the new holder would
-- then overwrite that acknowledged write. Once the new holder has claimed, the
-- old holder's write is rejected instead, so every write the store accepted is
-- one the next reader sees.
local token = tonumber(ARGV[1])
local highest = math.max(tonumber(redis.call('hget', KEYS[1], 'token')) or 0,
                         tonumber(redis.call('hget', KEYS[1], 'claim')) or 0)
if token < highest then
  return {highest, ''}
end
if token > highest then
  redis.call('hset', KEYS[1], 'claim', ARGV[1])
end
return {token, redis.call('hget', KEYS[1], 'value') or ''}
