-- pass: hand a wake-up on to the next waiting client, if the lock is free.
--
-- KEYS[1]  lock hash
-- KEYS[2]  the lock's channel (same hash tag; see queue.lua)
-- KEYS[3]  the lock's wait queue (same hash tag)
-- ARGV[1]  "s" to notify with SPUBLISH, anything else PUBLISH
-- ARGV[2]  the caller's client id
-- ARGV[3]  handoff window in ms for the next client (0: none)
--
-- A client's last waiter that was woken but leaves without trying (its
-- context ended) would take the release's only wake-up with it; this gives
-- it to the next client instead. Returns 1 when the lock was free or
-- reserved for the caller's client (and the next live client, if any, was
-- woken), 0 when someone else holds it or has it reserved (their release
-- or handoff will wake).
local key = KEYS[1]
if redis.call('exists', key) == 1 then
  if redis.call('hget', key, HANDOFF) ~= ARGV[2] or redis.call('hlen', key) ~= 1 then
    return 0
  end
  redis.call('del', key)
end
wake(key, KEYS[3], KEYS[2], ARGV[1] == 's', 'pass', tonumber(ARGV[3]))
return 1
