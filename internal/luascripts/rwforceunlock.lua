-- rwforceunlock: delete an RWMutex's holds whoever holds them, drop the
-- woken clients that have not come (unwake), and wake as a release would.
-- KEYS[1..6]  rwqueue.lua's
-- ARGV[1]  B, for the channels  ARGV[2]  wake spec
-- Returns as forceunlock.lua does.
local bad = foreign('hherzz')
if bad then
  return bad
end
-- Dead readers are nobody's: dropping them is no force-unlock, so only
-- live state counts (a dead writer's key has expired already).
drop_lapsed(readers, server_ms())
local held = redis.call('del', w, readers.counts, readers.leases, readers.records)
local rdropped, ropen = unwake(R)
local wdropped, wopen = unwake(W)
if held + rdropped + wdropped == 0 then
  return 0
end
rw_wake(ARGV[2], 0)
return math.min(held + ropen + wopen, 1)
