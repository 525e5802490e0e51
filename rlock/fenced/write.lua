-- write: store a value only if its fencing token is not below the highest seen.
--
-- KEYS[1]  hash {token = highest accepted token, value = last accepted value,
--          claim = highest token that claimed before reading (claim.lua)}
-- KEYS[2]  audit log: a list of the last ARGV[3] accepted tokens, in order
-- ARGV[1]  the writer's fencing token (1 to 2^53-1, so tonumber is exact)
-- ARGV[2]  the value
-- ARGV[3]  how many tokens the log keeps, a decimal integer; 0 keeps no log
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
-- The log is bounded: unbounded, it grew by one entry per write forever.
local limit = tonumber(ARGV[3])
if limit > 0 then
  redis.call('rpush', KEYS[2], ARGV[1])
  -- The string, not -limit: Redis formats a Lua number from 1e17 up as a
  -- float, which LTRIM rejects after HSET and RPUSH have run.
  redis.call('ltrim', KEYS[2], '-' .. ARGV[3], -1)
end
return token
