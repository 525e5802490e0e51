-- electresign: the leader steps down (or a grant of unknown outcome is
-- undone). The Mutex's release (release.lua, run first as the function
-- release, on KEYS[1..5] and ARGV[1..4]) is never given an heir:
-- leadership goes to the oldest campaigner queued in Redis, which it wakes,
-- not to another goroutine of the leader's process. The value goes with the
-- lock hash. When nobody was woken to take over, the observers are told, so
-- that they read "no leader".
--
-- KEYS[1..5] release.lua's
-- ARGV[1..4] release.lua's
-- ARGV[5]    the observers' channel (same hash tag)
--
-- Returns release.lua's reply.
local r = release(KEYS, {unpack(ARGV, 1, 4)})
-- A retry reports {0, 0} too, perhaps after another's grant: that one was
-- announced already.
if r[1] == 0 and r[2] == 0 and redis.call('exists', KEYS[1]) == 0 then
  redis.call(publisher(ARGV[3]), ARGV[5], 'all')
end
return r
