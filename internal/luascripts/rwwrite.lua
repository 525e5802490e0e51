-- rwwrite: a new owner takes the write hold of an RWMutex, or learns how long to wait.
--
-- KEYS[1..8]  as rwqueue.lua says: B:w, the read side's B:rd, B:rd:e and
--             B:rd:rec, the queues B:qr and B:qw with their descriptions
-- KEYS[9]  fencing counter B:fence (no expiry)
-- ARGV[1]  base key B           ARGV[2]  owner id (new)
-- ARGV[3]  lease in ms (> 0)    ARGV[4]  the caller's client id
-- ARGV[5]  "1" to queue the client if refused (and dequeue it if granted)
-- ARGV[6]  wake spec (queue.lua's publisher), e.g. "p50"
-- ARGV[7]  the caller's "<ms>|<client description>" (record.lua)
--
-- Admitted as rwqueue.lua says. Readers whose lease ran out are dropped on
-- the way; a caller refused only because of clients queued before it wakes
-- whom the lock admits (rw_wake).
-- Returns {1, token} when granted; refused, queue.lua's {0, wait, place,
-- record}: wait is how long until the state can change without a message,
-- -1 for no bound; record the writer's, or the first reader's to end.
local fence = KEYS[9]
local owner, lease, client, queued = ARGV[2], tonumber(ARGV[3]), ARGV[4], ARGV[5] == '1'

-- ahead counts the clients queued before the caller (all, when it is not).
local function ahead()
  local mine = redis.call('zscore', W.key, client)
  if mine then
    return redis.call('zcount', W.key, '-inf', '(' .. mine) + redis.call('zcount', R.key, '-inf', '(' .. mine)
  end
  return redis.call('zcard', W.key) + redis.call('zcard', R.key)
end

local pttl, holder = -2, nil
if redis.call('exists', w) == 1 then
  pttl, holder = redis.call('pttl', w), redis.call('hget', w, '#rec')
else
  local n, least, first = live_readers()
  if n > 0 then
    pttl, holder = least, first
  elseif ahead() > 0 then
    local _, ends = rw_wake(ARGV[6], 0, client)
    if ahead() > 0 then
      pttl = wait_for(ends, -1)
    end
  end
end
if pttl ~= -2 then
  return refused(queued, W, client, pttl, ARGV[7], holder)
end
local token = redis.call('incr', fence)
redis.call('hset', w, owner, 1, '#rec', record_of(owner, token, ARGV[7]))
redis.call('pexpire', w, lease)
if queued then
  dequeue(W, client)
end
return {1, token}
