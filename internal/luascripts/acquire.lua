-- acquire: a new owner takes the lock, or learns how long to wait.
--
-- KEYS[1]  lock hash            {owner id -> hold count, "#rec" -> the
--          holder record (record.lua)}
-- KEYS[2]  fencing counter      (same hash tag as KEYS[1]; no expiry)
-- KEYS[3]  wait queue           (same hash tag; see queue.lua)
-- KEYS[4]  the wait queue's description hash (same hash tag; see queue.lua)
-- ARGV[1]  owner id (new: never held before)
-- ARGV[2]  lease in ms (> 0)
-- ARGV[3]  the caller's client id
-- ARGV[4]  "1" if the caller waits for a wake-up: refused, its client is
--          queued; granted, it is taken off the queue. "0" otherwise.
-- ARGV[5]  the caller's client description, for the holder record and,
--          when it queues, the queue's description hash
-- ARGV[6]  wake spec, e.g. "p50" (queue.lua's publisher)
-- ARGV[7]  the lock's channel (waiters listen on "<channel>:<client id>")
--
-- Granted when the lock is free and no client is queued before the caller.
-- Returns {1, token} when granted (token: the grant's fencing token, one
-- more than any before); refused, queue.lua's {0, wait, place, record}:
-- wait is the holder's PTTL (-1 without expiry), or, when the lock is free
-- but a client queued before the caller was woken, the rest of its window
-- (and the caller's lease more, unless the caller is next after it).
--
-- The fencing counter has no expiry: a token must never go back, even after
-- the lock has been free for a long time.
local lock, fence = KEYS[1], KEYS[2]
local Q = {key = KEYS[3], desc = KEYS[4], ch = ARGV[7] .. ':'}
local owner, lease, client, waiter = ARGV[1], tonumber(ARGV[2]), ARGV[3], ARGV[4] == '1'
-- One EXISTS answers the common cases: 0, free with nobody queued; 2, held.
local n = redis.call('exists', lock, Q.key)
local pttl, ahead, first = -2, 0, nil
if n > 0 then
  pttl = redis.call('pttl', lock)
end
if n == 1 and pttl == -2 then
  -- Free with clients queued: the walk wakes the client queued first if it
  -- has not been, and drops those that lost their place.
  ahead, first = wake(Q, ARGV[6], 1, one, client)
end
local free = pttl == -2
if free and ahead == 0 then
  local token = redis.call('incr', fence)
  redis.call('hset', lock, owner, 1, '#rec', record_of(owner, token, ARGV[5]))
  redis.call('pexpire', lock, lease)
  if waiter and n == 1 then
    dequeue(Q, client)
  end
  return {1, token}
end
if free then
  -- Only the client next after the woken ones watches their window, to
  -- take their place should they never come; one further back (a client
  -- that just released, trying again) is woken by a release, so it waits
  -- until the woken client's lease could have run out: no try at the
  -- window's end that the woken client's hold would refuse.
  -- The caller's rank after its ZADD tells which: one ZRANK, no ZCARD.
  local wait = wait_for(first, -1)
  if waiter and wait >= 0 then
    local rest = wait
    wait = function(rank)
      if rank > ahead then
        return rest + lease
      end
      return rest
    end
  end
  return refused(waiter, Q, client, wait, ARGV[5])
end
-- Held: n == 1 says there is no queue (enqueue needs no PTTL of it).
return refused(waiter, Q, client, pttl, ARGV[5], redis.call('hget', lock, '#rec'), n == 1)
