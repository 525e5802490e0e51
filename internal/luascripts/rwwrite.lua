-- rwwrite: a new owner takes the write hold of an RWMutex, or learns how long to wait.
-- KEYS[1..6]  rwqueue.lua's
-- KEYS[7]  fencing counter B:fence (no expiry)
-- ARGV[1]  base key B           ARGV[2]  owner id (new)
-- ARGV[3]  lease in ms (> 0)    ARGV[4]  the caller's queue entry
-- ARGV[5]  "1" to queue the client if refused (and dequeue it if granted)
-- ARGV[6]  wake spec (queue.lua)    ARGV[7]  about (record.lua)
-- Returns {1, token}, else queue.lua's refusal with the writer's record or
-- the first reader's to end and, as place, 1 + the clients (readers and
-- writers) queued before the caller; refused only for queued clients, it wakes.
local owner, lease, client, queued = ARGV[2], tonumber(ARGV[3]), ARGV[4], ARGV[5] == '1'

-- ahead counts the clients queued before the caller (all, when it is not).
local function ahead()
  local mine = redis.call('zscore', W.key, client)
  if mine then
    return redis.call('zcount', W.key, '-inf', '(' .. mine) + redis.call('zcount', R.key, '-inf', '(' .. mine)
  end
  return redis.call('zcard', W.key) + redis.call('zcard', R.key)
end

local pttl, holder = write_hold()
if pttl == -2 then
  local n, least, first = live_readers()
  if n > 0 then
    pttl, holder = least, first
  elseif ahead() > 0 then
    local _, ends = rw_wake(ARGV[6], 0, nil, client)
    if ahead() > 0 then
      pttl = wait_for(ends, -1)
    end
  end
end
if pttl ~= -2 then
  -- It waits for the readers queued before it too.
  return rw_refused(W, client, queued, pttl, holder, function()
    return ahead() + 1
  end)
end
local token = grant(w, KEYS[7], owner, lease, ARGV[7])
if queued then
  dequeue(W, client)
end
return {1, token}
