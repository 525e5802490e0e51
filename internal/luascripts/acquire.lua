-- acquire: a new owner takes the lock, or learns how long to wait.
--
-- KEYS[1]  lock hash            {owner id -> hold count}
-- KEYS[2]  fencing counter      (same hash tag as KEYS[1]; no expiry)
-- KEYS[3]  wait queue           (same hash tag; see queue.lua)
-- KEYS[4]  reservation          (same hash tag; see queue.lua)
-- KEYS[5]  holder record        (same hash tag; see describe.lua)
-- KEYS[6]  the wait queue's description hash (same hash tag; see queue.lua)
-- ARGV[1]  owner id (new: never held before)
-- ARGV[2]  lease in ms (> 0)
-- ARGV[3]  the caller's client id
-- ARGV[4]  "1" if the caller waits for a wake-up: refused, its client is
--          queued; granted, it is taken off the queue. "0" otherwise.
-- ARGV[5]  the caller's client description, for the holder record and,
--          when it queues, the queue's description hash
--
-- Returns {1, token} when granted (token: the grant's fencing token, one
-- more than any before); refused, queue.lua's {0, pttl, reserved, place,
-- record}: pttl is how long the holder's lease lasts, -1 without expiry;
-- reserved is 1 when the free lock is reserved for another client, for
-- pttl (the caller may check whether that client took it, a PTTL of the
-- lock, before it tries again), and then there is no holder record.
--
-- The fencing counter has no expiry: a token must never go back, even after
-- the lock has been free for a long time.
local lock, fence, queue, reservation, record, desc = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6]
local owner, lease, client, waiter = ARGV[1], tonumber(ARGV[2]), ARGV[3], ARGV[4] == '1'
-- One EXISTS for both keys answers the common case: a lock that is free and
-- reserved for nobody is granted without further reads.
local pttl, mine, other -- the free lock is reserved for the caller, for another client
if redis.call('exists', lock, reservation) == 0 then
  pttl = -2
else
  pttl = redis.call('pttl', lock)
  if pttl == -2 then
    -- Free but reserved: only the woken client may take it.
    if redis.call('get', reservation) == client then
      redis.call('del', reservation)
      mine = true
    else
      pttl = redis.call('pttl', reservation)
      other = true
    end
  end
end
if pttl == -2 then
  redis.call('hset', lock, owner, 1)
  redis.call('pexpire', lock, lease)
  -- The release that reserved the lock for this client popped it off
  -- the queue already.
  if waiter and not mine then
    dequeue(queue, desc, client)
  end
  local token = redis.call('incr', fence)
  describe(record, owner, token, ARGV[5], lease)
  return {1, token}
end
-- Reserved for another, the lock has no holder to name.
return refused(waiter, queue, desc, client, pttl, ARGV[5], other, not other and redis.call('get', record))
