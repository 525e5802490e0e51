-- rwread: a new owner takes a read hold of an RWMutex, or learns how long to wait.
--
-- KEYS[1..8]  as rwqueue.lua says: B:w, the read side's B:rd, B:rd:e and
--             B:rd:rec, the queues B:qr and B:qw with their descriptions
-- ARGV[1]  base key B           ARGV[2]  owner id (new)
-- ARGV[3]  lease in ms (> 0)    ARGV[4]  the caller's client id
-- ARGV[5]  "1" to queue the client if refused (and dequeue it if granted)
-- ARGV[6]  the write owner the caller holds, or "": a writer may always read
-- ARGV[7]  wake spec (queue.lua's publisher), e.g. "p50"
-- ARGV[8]  the caller's "<ms>|<client description>" (record.lua)
--
-- Admitted as rwqueue.lua says: writers come first. A caller refused only
-- because a writer queued before it wakes whom the lock admits (rw_wake).
-- Returns {1, 0} when granted (readers get no token); refused, queue.lua's
-- {0, wait, place, record}: wait is how long until the state can change
-- without a message, -1 for no bound; record the writer's.
local owner, lease, client, queued, writer = ARGV[2], tonumber(ARGV[3]), ARGV[4], ARGV[5] == '1', ARGV[6]
local writes = writer ~= '' and redis.call('hexists', w, writer) == 1
local pttl, holder = -2, nil
if not writes then
  if redis.call('exists', w) == 1 then
    pttl, holder = redis.call('pttl', w), redis.call('hget', w, '#rec')
  else
    local before = first_writer()
    local mine = before and redis.call('zscore', R.key, client)
    if before and (not mine or before < tonumber(mine)) then
      local _, first = rw_wake(ARGV[7], redis.call('hlen', readers.counts), client)
      pttl = wait_for(first, math.max(redis.call('pttl', readers.counts), -1))
    end
  end
end
if pttl ~= -2 then
  return refused(queued, R, client, pttl, ARGV[8], holder)
end
redis.call('hincrby', readers.counts, owner, 1)
lease_start(readers, owner, server_ms(), lease, record_of(owner, 0, ARGV[8]))
if queued then
  dequeue(R, client)
end
return {1, 0}
