-- inspect: read a lock's state in one round trip, changing nothing.
--
-- KEYS[1]  lock hash
-- ARGV[1]  owner id whose hold count is wanted
--
-- Returns {held, count, pttl}: held is 1 when anyone holds the lock, else 0;
-- count is ARGV[1]'s hold count (0 when it holds none); pttl is the key's
-- remaining time to live in ms (-2 when there is no lock, -1 without expiry).
local key = KEYS[1]
local held = redis.call('exists', key)
local count = tonumber(redis.call('hget', key, ARGV[1])) or 0
return {held, count, redis.call('pttl', key)}
