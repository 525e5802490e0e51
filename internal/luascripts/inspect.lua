-- inspect: read a lock's state in one round trip, changing nothing.
--
-- KEYS[1]  lock hash
-- ARGV[1]  owner id whose hold count is wanted
--
-- Returns {held, count, pttl}: held is 1 when anyone holds the lock, else 0;
-- count is ARGV[1]'s hold count (0 when it holds none); pttl is the key's
-- remaining time to live in ms (-2 when there is no lock, -1 without expiry).
-- A key that only reserves the lock for a woken client (a handoff, see
-- queue.lua) is not held: nobody holds it yet.
local key = KEYS[1]
if redis.call('hlen', key) == 1 and redis.call('hexists', key, '#handoff') == 1 then
  return {0, 0, -2}
end
local held = redis.call('exists', key)
local count = tonumber(redis.call('hget', key, ARGV[1])) or 0
return {held, count, redis.call('pttl', key)}
