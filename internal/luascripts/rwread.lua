-- rwread: a new owner takes a read hold of an RWMutex, or learns how long to wait.
-- KEYS[1..6]  rwqueue.lua's
-- ARGV[1]  base key B           ARGV[2]  owner id (new)
-- ARGV[3]  lease in ms (> 0)    ARGV[4]  the caller's queue entry
-- ARGV[5]  "1" to queue the client if refused (and dequeue it if granted)
-- ARGV[6]  the write owner the caller holds, or "": a writer may always read
-- ARGV[7]  wake spec (queue.lua)    ARGV[8]  about (record.lua)
-- Returns {1, 0} (readers get no token), else queue.lua's refusal with the
-- writer's record and, as place, 1 + the writers queued before the caller;
-- refused only for a queued writer, it wakes (rw_wake); granted once its walks
-- dropped writers, it wakes the readers behind it.
local owner, lease, client, queued, writer = ARGV[2], tonumber(ARGV[3]), ARGV[4], ARGV[5] == '1', ARGV[6]
check_types(readers)
local pttl, holder = -2, nil
-- dropped: the writers this call's walks dropped (woken ones past their
-- window, ones nobody listens for); granted, the caller wakes on past itself.
local dropped = 0
if writer == '' or redis.call('hexists', w, writer) == 0 then
  pttl, holder = write_hold()
  if pttl == -2 then
    local before, _, d = first_writer(ARGV[7])
    dropped = d
    local mine = before and redis.call('zscore', R.key, client)
    if before and (not mine or before < tonumber(mine)) then
      local _, first, _, left, d2 = rw_wake(ARGV[7], redis.call('hlen', readers.counts), client, nil, before)
      dropped = dropped + d2
      -- Refused while a writer is left before it; readers woken with it
      -- are no reason: they share.
      if left and (not mine or left < tonumber(mine)) then
        pttl = wait_for(first, math.max(redis.call('pttl', readers.counts), -1))
      end
    end
  end
end
if pttl ~= -2 then
  -- It waits for the writers queued before it; the readers before it
  -- are admitted with it.
  return rw_refused(R, client, queued, pttl, holder, function()
    return redis.call('zcount', W.key, '-inf', '(' .. redis.call('zscore', R.key, client)) + 1
  end)
end
redis.call('hincrby', readers.counts, owner, 1)
lease_start(readers, owner, server_ms(), lease, record_of(owner, 0, ARGV[8]))
if queued then
  dequeue(R, client)
end
if dropped > 0 then
  -- The readers queued behind the caller, before the next writer that may
  -- still come, share with it: nobody told them, as the writers dropped
  -- stood before them when the write side was freed, and the walks above
  -- stop at the caller or walk the writers only. Those in their window are
  -- counted, not told again. A grant with no drop needs no walk: the walk
  -- that opened the readers' turn told them, or their bound is the end of
  -- the lease that ran out.
  rw_wake(ARGV[7], 1)
end
return {1, 0}
