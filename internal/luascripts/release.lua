-- release: drop one hold; at the last, hand the lock to an heir or free it.
--
-- KEYS[1]  lock hash            {owner id -> hold count}
-- KEYS[2]  the lock's channel   (same hash tag; waiters listen on
--          "<channel>:<client id>", see queue.lua)
-- KEYS[3]  fencing counter      (same hash tag)
-- KEYS[4]  wait queue           (same hash tag)
-- KEYS[5]  reservation          (same hash tag)
-- KEYS[6]  holder record        (same hash tag; see describe.lua)
-- KEYS[7]  the wait queue's description hash (same hash tag; see queue.lua)
-- ARGV[1]  owner id
-- ARGV[2]  the owner's hold count before this release (exact: the caller
--          serialises an owner's calls, so it knows it)
-- ARGV[3]  wake spec: "p" or "s" (PUBLISH or SPUBLISH) and the reservation
--          window in ms for the client woken, e.g. "p50" (see queue.lua)
-- ARGV[4]  "1" if an earlier call with these arguments may have run (its
--          reply was lost), "0" otherwise
-- ARGV[5]  optional heir: a new owner id of the caller's client. At the last
--          hold the lock passes to the heir: a new grant with a new token,
--          no message and no acquire. Absent or "" for none.
-- ARGV[6]  the heir's lease in ms (> 0), with ARGV[5]
-- ARGV[7]  the heir's client description, with ARGV[5]
--
-- Returns {status, token}:
--   { n, 0}  n >= 1 holds left
--   { 0, w}  freed: the oldest listening queued client was woken (w = 1),
--            or none listened (w = 0); a retry reports 0
--   {-1, 0}  the owner does not hold the lock with that count: nothing changed
--   {-3, t}  handed over: the heir holds the lock, with token t
--
-- Idempotent: a retry finds the state the first call left (the count one
-- lower, the owner gone, or the heir in its place) and reports it again
-- without changing anything. Owner ids are never reused, so nobody else
-- can have made that state; but a lease that ran out before the first call
-- arrived leaves the same "owner gone", which a retry reports as freed.
local lock, channel, fence, queue, reservation, record = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6]
local desc = KEYS[7]
local owner, n, heir = ARGV[1], tonumber(ARGV[2]), ARGV[5] or ''
local left, earlier = release_count(lock, owner, n, ARGV[4] == '1', true) -- DEL follows
if earlier and left == 0 and heir ~= '' and redis.call('hexists', lock, heir) == 1 then
  return {-3, tonumber(redis.call('get', fence)) or 0}
end
if left ~= 0 or earlier then
  return {left, 0}
end
redis.call('del', lock, record)
if heir ~= '' then
  local lease = tonumber(ARGV[6])
  redis.call('hset', lock, heir, 1)
  redis.call('pexpire', lock, lease)
  local token = redis.call('incr', fence)
  describe(record, heir, token, ARGV[7], lease)
  return {-3, token}
end
if wake(queue, desc, channel, reservation, ARGV[3]) then
  return {0, 1}
end
return {0, 0}
