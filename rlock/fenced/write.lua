-- write: store a value only if its fencing token is not below the highest seen.
--
-- KEYS[1]  hash {token = highest accepted token, value = last accepted value,
--          claim = highest token that claimed before reading (claim.lua)}
-- KEYS[2]  audit log: a list of every accepted token, in order
-- ARGV[1]  the writer's fencing token (> 0)
-- ARGV[2]  the value
--
-- Returns the highest token after the call: ARGV[1] when the write was
-- accepted, a larger one when it was rejected as stale (a later holder has
-- written or claimed).
local token = tonumber(ARGV[1])
local highest = math.max(tonumber(redis.call('hget', KEYS[1], 'token')) or 0,
                         tonumber(redis.call('hget', KEYS[1], 'claim')) or 0)
if token < highest then
  return highest
end
redis.call('hset', KEYS[1], 'token', ARGV[1], 'value', ARGV[2])
redis.call('rpush', KEYS[2], ARGV[1])
return token
