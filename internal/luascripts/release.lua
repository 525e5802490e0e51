-- release: drop one hold of the reentrant lock; at zero, hand it over to a
-- waiter of the same client, or delete it and wake a waiting client.
--
-- KEYS[1]  lock hash            {owner id -> hold count}
-- KEYS[2]  the lock's channel   (same hash tag as KEYS[1], so same Cluster slot)
-- KEYS[3]  fencing counter      (same hash tag)
-- KEYS[4]  the lock's wait queue (same hash tag; see queue.lua)
-- ARGV[1]  owner id
-- ARGV[2]  "s" to notify with SPUBLISH (Cluster, sharded pub/sub), anything else PUBLISH
-- ARGV[3]  expected hold count, or "0" for any. With a number n > 0 the release
--          happens only if the caller's count is exactly n: this is how an
--          acquisition whose reply was lost is undone without touching the
--          holds the caller already had.
-- ARGV[4]  on a retry, the fencing token of the caller's grant, or "": with
--          a token, a hold of the same owner from a later grant is not
--          touched, so a retried release cannot end a newer acquisition.
-- ARGV[5]  release id, or "". A release records its id in the field
--          "<owner>#r" (unless it deletes the key), and a retry (ARGV[11])
--          carrying the same id finds it and changes nothing: a retried
--          release cannot drop two holds, and learns that its first call
--          handed the lock over.
-- ARGV[6]  handoff window in ms for the client woken (0: none; see queue.lua)
-- ARGV[7]  heir: an owner id of the caller's client that waits for this lock,
--          or "". At the last hold the lock passes straight to the heir, a new
--          grant with a new token and no message, unless ARGV[9] says yield.
-- ARGV[8]  the heir's lease in ms
-- ARGV[9]  "y" to yield: hand over only if no other client is queued, and
--          otherwise wake the oldest other client, queueing ours at the back
-- ARGV[10] the caller's client id (to tell other clients in the queue from it)
-- ARGV[11] "1" on a retry of a release whose reply was lost, "0" otherwise
--          (a first call needs neither the id nor the token check: the
--          caller's own bookkeeping already matches the grant)
--
-- Returns {status, token}:
--          {-1, 0}  the caller does not hold the lock (with that token;
--                   nothing changed, nothing published)
--          {-2, 0}  the caller holds it, but not with the expected count
--          {-3, t}  handed over: the heir holds it with count 1 and token t
--          { 0, 0}  released: the oldest live waiting client was woken and the
--                   key reserved for it, or the key is gone (see queue.lua)
--          { n, 0}  still held by the caller with n holds left
local key, channel, fence, queue, owner = KEYS[1], KEYS[2], KEYS[3], KEYS[4], ARGV[1]
local expected, token, rid, heir = tonumber(ARGV[3]), ARGV[4], ARGV[5], ARGV[7]
local marker = owner .. '#r'
local count = tonumber(redis.call('hget', key, owner))
if ARGV[11] == '1' and rid ~= '' and redis.call('hget', key, marker) == rid then
  if count == nil then
    return {-3, tonumber(redis.call('get', fence)) or 0}
  end
  return {count, 0}
end
if count == nil then
  return {-1, 0}
end
if token ~= '' and redis.call('get', fence) ~= token then
  return {-1, 0}
end
if expected ~= nil and expected > 0 and count ~= expected then
  return {-2, 0}
end
if count > 1 then
  if rid ~= '' then
    redis.call('hset', key, marker, rid)
  end
  return {redis.call('hincrby', key, owner, -1), 0}
end
local yield = heir ~= '' and ARGV[9] == 'y'
if heir ~= '' then
  local others = 0
  if yield then
    others = redis.call('zcard', queue)
    if others > 0 and redis.call('zscore', queue, ARGV[10]) then
      others = others - 1
    end
  end
  if others == 0 then
    redis.call('hdel', key, owner)
    redis.call('hset', key, heir, 1)
    if rid ~= '' then
      redis.call('hset', key, marker, rid)
    end
    redis.call('pexpire', key, tonumber(ARGV[8]))
    return {-3, redis.call('incr', fence)}
  end
end
redis.call('del', key)
local skip = nil
if yield then
  -- Yielding: the oldest other client goes first, even if ours is older.
  skip = ARGV[10]
end
wake(key, queue, channel, ARGV[2] == 's', 'unlock', tonumber(ARGV[6]), skip)
return {0, 0}
