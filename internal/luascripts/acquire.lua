-- acquire: take the reentrant lock, or say how long the current holder keeps it.
--
-- KEYS[1]  lock hash            {owner id -> hold count}
-- ARGV[1]  owner id
-- ARGV[2]  lease in milliseconds (> 0)
--
-- Returns {1, count} when the caller holds the lock afterwards (count = new hold
-- count, 1 for a first acquisition), or {0, pttl} when another owner holds it
-- (pttl = the key's remaining time to live in ms, -1 when it has no expiry).
--
-- PTTL comes first because it answers two questions at once: -2 means the
-- lock is free, and anything else is what a refused caller needs. A refusal
-- thus costs two calls, a first acquisition three.
--
-- The expiry is only ever raised here, never lowered: a reentrant acquisition
-- with a short lease must not cut short a longer lease an outer level was
-- promised.
local key, owner, lease = KEYS[1], ARGV[1], tonumber(ARGV[2])
local pttl = redis.call('pttl', key)
if pttl ~= -2 and redis.call('hexists', key, owner) == 0 then
  return {0, pttl}
end
local count = redis.call('hincrby', key, owner, 1)
if pttl < lease then
  redis.call('pexpire', key, lease)
end
return {1, count}
