-- release: drop one hold; at the last, hand the lock to an heir or free it.
--
-- KEYS[1]  lock hash            {owner id -> hold count, "#rec" -> the
--          holder record (record.lua)}
-- KEYS[2]  the lock's channel   (same hash tag; waiters listen on
--          "<channel>:<client id>", see queue.lua)
-- KEYS[3]  fencing counter      (same hash tag)
-- KEYS[4]  wait queue           (same hash tag)
-- KEYS[5]  the wait queue's description hash (same hash tag; see queue.lua)
-- ARGV[1]  owner id
-- ARGV[2]  the owner's hold count before this release (exact)
-- ARGV[3]  wake spec, e.g. "p50" (queue.lua's publisher)
-- ARGV[4]  "1" if an earlier call with these arguments may have run, else "0"
-- ARGV[5]  optional heir: a new owner id of the caller's client, to which the
--          last hold passes as a new grant with a new token. Absent or "" for none.
-- ARGV[6]  the heir's lease in ms (> 0), with ARGV[5]
-- ARGV[7]  the heir's client description, with ARGV[5]
--
-- Returns {status, token}:
--   { n, 0}  n >= 1 holds left
--   { 0, w}  freed: the client queued first that listens was woken, or
--            was in its window already (w = 1), or none listened (w = 0);
--            a retry reports 0
--   {-1, 0}  the owner does not hold the lock with that count: nothing changed
--   {-3, t}  handed over: the heir holds the lock, with token t
--
-- Idempotent: a retry reports the state the first call left (the count one
-- lower, the owner gone, or the heir in its place) and changes nothing. A
-- lease that ran out before the first call also leaves "owner gone": freed.
local lock, fence = KEYS[1], KEYS[3]
local owner, n, heir = ARGV[1], tonumber(ARGV[2]), ARGV[5] or ''
local left, earlier = release_count(lock, owner, n, ARGV[4] == '1', true) -- DEL follows
if earlier and left == 0 and heir ~= '' and redis.call('hexists', lock, heir) == 1 then
  return {-3, tonumber(redis.call('get', fence)) or 0}
end
if left ~= 0 or earlier then
  return {left, 0}
end
-- The record goes with the hash.
redis.call('del', lock)
if heir ~= '' then
  local token = redis.call('incr', fence)
  redis.call('hset', lock, heir, 1, '#rec', record_of(heir, token, ARGV[7]))
  redis.call('pexpire', lock, ARGV[6])
  return {-3, token}
end
local woken = wake({key = KEYS[4], desc = KEYS[5], ch = KEYS[2] .. ':'}, ARGV[3], 1, one)
return {0, woken}
