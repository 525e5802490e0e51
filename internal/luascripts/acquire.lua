-- acquire: a new owner takes the lock, or learns how long to wait.
-- KEYS[1]  lock hash {owner id -> hold count, "#rec" -> record (record.lua)}
-- KEYS[2]  fencing counter (no expiry: a token never goes back)
-- KEYS[3]  wait queue (queue.lua)
-- ARGV[1]  owner id (new)       ARGV[2]  lease in ms (> 0)
-- ARGV[3]  the caller's queue entry (queue.lua)
-- ARGV[4]  "1" to queue the client if refused (and dequeue it if granted)
-- ARGV[5]  about (record.lua)   ARGV[6]  wake spec (queue.lua)
-- ARGV[7]  the lock's channel (waiters listen on "<channel>:<client id>")
-- Returns {1, token} (free, nobody queued first), else queue.lua's refusal.
local lock = KEYS[1]
local Q = {key = KEYS[3], ch = ARGV[7] .. ':'}
local owner, lease, client, waiter = ARGV[1], tonumber(ARGV[2]), ARGV[3], ARGV[4] == '1'
-- One EXISTS tells which of the lock and its queue exist: a key named
-- twice counts twice, so n = 2 * (lock exists) + (queue exists).
local n = redis.call('exists', lock, lock, Q.key)
local queued, pttl, ahead, first = n % 2 == 1, -2, 0, nil
if n >= 2 then
  pttl = redis.call('pttl', lock)
end
if queued and pttl == -2 then
  -- Free with clients queued: wake the first if it was not, dropping those
  -- that lost their place.
  ahead, first = wake(Q, ARGV[6], 1, one, client)
end
local free = pttl == -2
if free and ahead == 0 then
  local token = grant(lock, KEYS[2], owner, lease, ARGV[5])
  if waiter and queued then
    dequeue(Q, client)
  end
  return {1, token}
end
if free then
  -- Only the client next after the woken ones retries at their window's
  -- end; one further back waits a lease more (docs/design.md, "Fairness").
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
  return refused(waiter, Q, client, wait)
end
-- Held: with no queue yet, enqueue needs no ZRANK or PTTL of it.
return refused(waiter, Q, client, pttl, redis.call('hget', lock, '#rec'), pttl, not queued)
