-- acquire: take the reentrant lock, or say how long the current holder keeps it.
--
-- KEYS[1]  lock hash            {owner id -> hold count}
-- KEYS[2]  fencing counter      (same hash tag as KEYS[1]; no expiry)
-- KEYS[3]  wait queue           (same hash tag; ZSET client id -> time queued)
-- ARGV[1]  owner id
-- ARGV[2]  lease in milliseconds (> 0)
-- ARGV[3]  the caller's client id
-- ARGV[4]  "w" when the caller will wait for a wake-up (pub/sub): its client
--          is queued if refused; "wr" when it also has other waiters of its
--          client behind it: the client is queued again, at the back, if it
--          acquires; "" otherwise (spin, TryLock without a wait). A waiter
--          ("w") that acquires takes its client off the queue, so that the
--          next release wakes a client that still waits.
--
-- Returns {1, count, token} when the caller holds the lock afterwards (count =
-- new hold count, 1 for a first acquisition; token = the fencing token of this
-- grant), or {0, pttl} when another owner holds it (pttl = the key's remaining
-- time to live in ms, -1 when it has no expiry).
--
-- PTTL comes first because it answers two questions at once: -2 means the
-- lock is free, and anything else is what a refused caller needs. A refusal
-- thus costs two calls.
--
-- A first acquisition increments the fencing counter, so tokens rise strictly
-- from grant to grant; a re-entry keeps the grant's token, which is the
-- counter's current value because nobody else can have incremented it while
-- the caller held the lock. The counter has no expiry: a token must never go
-- back, even when the lock has been free for a long time.
--
-- The expiry is only ever raised here, never lowered: a reentrant acquisition
-- with a short lease must not cut short a longer lease an outer level was
-- promised.
--
-- A refused waiter queues its client, and the queue lives a while past the
-- holder's lease, so that it outlives every waiter's TTL-bounded wait but not
-- an abandoned lock.
--
-- A key holding only a handoff (see queue.lua) is free for the client it
-- names and held for everyone else; they are told to wait for the rest of
-- the handoff window, after which the woken client holds the lock (and
-- they learn its lease) or has lost its turn.
local key, fence, queue, owner, lease = KEYS[1], KEYS[2], KEYS[3], ARGV[1], tonumber(ARGV[2])
local client, waiting, requeue = ARGV[3], ARGV[4] ~= '', ARGV[4] == 'wr'
local pttl = redis.call('pttl', key)
if pttl ~= -2 and redis.call('hexists', key, owner) == 0 then
  local reserved = redis.call('hget', key, HANDOFF)
  if reserved == client and redis.call('hlen', key) == 1 then
    redis.call('del', key)
    pttl = -2
  else
    if waiting then
      enqueue(queue, client, math.max(pttl, 0) + 10000)
    end
    return {0, pttl}
  end
end
local count = redis.call('hincrby', key, owner, 1)
if pttl < lease then
  redis.call('pexpire', key, lease)
end
if waiting then
  if requeue then
    enqueue(queue, client, lease + 10000)
  else
    redis.call('zrem', queue, client)
  end
end
local token
if count == 1 then
  token = redis.call('incr', fence)
else
  token = tonumber(redis.call('get', fence)) or 0
end
return {1, count, token}
