-- redissondescribe: a Redisson-format lock's state for Inspect, changing
-- nothing. It has holders only: no records, no queue, no reservation.
--
-- KEYS[1]  lock hash            (see redissonacquire.lua)
-- KEYS[2]  the lock's channel   (unused; Intro's calling convention)
-- ARGV[1]  the most queued clients to return (unused: there is no queue)
--
-- Returns a describe reply (queue.lua): {holds, {}, 0, ""}, each hold
-- {"", owner, count, pttl, ""}.
local holds = {}
local kv = redis.call('hgetall', KEYS[1])
local left = redis.call('pttl', KEYS[1])
for i = 1, #kv, 2 do
  for _, v in ipairs({'', kv[i], kv[i + 1], left, ''}) do
    holds[#holds + 1] = v
  end
end
return {holds, {}, 0, ''}
