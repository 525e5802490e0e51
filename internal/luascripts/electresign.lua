-- electresign: the leader steps down (or a grant of unknown outcome is
-- undone). The Mutex's release (release.lua, run first as the function
-- release, on KEYS[1..5] and ARGV[1..4]) is never given an heir:
-- leadership goes to the oldest campaigner queued in Redis, which it wakes,
-- not to another goroutine of the leader's process. When nobody was woken
-- to take over, the observers are told, so that they read "no leader".
--
-- KEYS[1..5] release.lua's
-- KEYS[6]    the value key (elect.lua)
-- ARGV[1..4] release.lua's
-- ARGV[5]    the observers' channel (same hash tag)
--
-- Returns release.lua's reply.
local owner, value = ARGV[1], KEYS[6]
local r = release({unpack(KEYS, 1, 5)}, {unpack(ARGV, 1, 4)})
if r[1] == 0 then
  -- A retry may come after the next leader's grant: delete only our value.
  local v = redis.call('get', value)
  if v and string.sub(v, 1, #owner + 1) == owner .. '|' then
    redis.call('del', value)
  end
  -- A retry reports 0 too, perhaps after another's grant: that one was
  -- announced already.
  if r[2] == 0 and redis.call('exists', KEYS[1]) == 0 then
    redis.call(publisher(ARGV[3]), ARGV[5], 'all')
  end
end
return r
