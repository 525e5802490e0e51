-- forceunlock: delete a Mutex whoever holds it, drop the client a release
-- woke and that has not come (queue.lua's unwake), and wake the next as a
-- release would.
--
-- KEYS[1..3]  as describe.lua's: lock (with its holder record), queue, the
--             queue's descriptions (see queue.lua)
-- ARGV[1]  the lock's channel (see queue.lua)
-- ARGV[2]  wake spec
--
-- Returns 1 when something was deleted or dropped (and the client queued
-- first that listens woken), 0 when there was nothing (nothing published),
-- or the name of a key of another type (nothing deleted).
local bad = foreign('hzh')
if bad then
  return bad
end
local Q = {key = KEYS[2], desc = KEYS[3], ch = ARGV[1] .. ':'}
if redis.call('del', KEYS[1]) + unwake(Q) == 0 then
  return 0
end
wake(Q, ARGV[2], 1, one)
return 1
