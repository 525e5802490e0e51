-- rwforceunlock: delete an RWMutex's write hold and read holds whoever
-- holds them, drop the clients woken that have not come (queue.lua's
-- unwake), and wake the clients the free lock admits, as a release would.
--
-- KEYS[1..8]  as rwqueue.lua says
-- ARGV[1]  B, for the channels
-- ARGV[2]  wake spec
--
-- Returns as forceunlock.lua does.
local bad = foreign('hhzhzhzh')
if bad then
  return bad
end
if redis.call('del', w, readers.counts, readers.leases, readers.records) + unwake(R) + unwake(W) == 0 then
  return 0
end
rw_wake(ARGV[2], 0)
return 1
