-- semforceunlock: delete a Semaphore's holders whoever they are, drop the
-- woken clients that have not come (unwake), and wake as a release would.
-- KEYS[1..5]  semqueue.lua's
-- ARGV[1]  B, for the channels  ARGV[2]  wake spec
-- Returns as forceunlock.lua does. B:qn keeps the size while clients wait.
local bad = foreign('herzw')
if bad then
  return bad
end
-- Dead holders are nobody's: dropping them (and B:h with the last) is no
-- force-unlock, so only live state counts.
local _, recorded = sem_held(server_ms())
local size = sem_size(recorded)
local held = redis.call('del', h, holders.leases, holders.records)
local dropped, open = unwake(Q)
if held + dropped == 0 then
  return 0
end
if size then
  sem_wake(ARGV[2], size)
end
return math.min(held + open, 1)
