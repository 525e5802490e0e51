-- semforceunlock: delete a Semaphore's holders whoever they are, drop the
-- clients woken that have not come (queue.lua's unwake), and wake the
-- clients the free permits serve, as a release would.
--
-- KEYS[1..6]  as semqueue.lua says
-- ARGV[1]  B, for the channels
-- ARGV[2]  wake spec
--
-- Returns as forceunlock.lua does. The size stays recorded in B:qn while
-- clients wait.
local bad = foreign('hzhzhh')
if bad then
  return bad
end
local size = sem_size()
if redis.call('del', h, holders.leases, holders.records) + unwake(Q) == 0 then
  return 0
end
if size then
  sem_wake(ARGV[2], size)
end
return 1
