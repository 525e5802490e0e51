-- inspect: read a lock's state in one round trip, changing nothing.
--
-- KEYS[1]  lock hash
-- ARGV[1]  owner id whose hold count is wanted ("" for none)
--
-- Returns {held, count, pttl}: held is 1 when anyone holds the lock, else 0;
-- count is ARGV[1]'s hold count (0 when it holds none); pttl is the key's
-- remaining time to live in ms (-2 when there is no lock, -1 without expiry).
local lock = KEYS[1]
local count = 0
if ARGV[1] ~= '' then
  count = tonumber(redis.call('hget', lock, ARGV[1])) or 0
end
return {redis.call('exists', lock), count, redis.call('pttl', lock)}
