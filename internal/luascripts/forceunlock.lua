-- forceunlock: delete a Mutex whoever holds it, drop the woken clients that
-- have not come (unwake), and wake the next as a release would. An
-- election's observers are told as a resignation tells them (vacated): the
-- lock is its leader's.
-- KEYS[1..2]  describe.lua's
-- ARGV[1]  the lock's channel   ARGV[2]  wake spec (queue.lua)
-- ARGV[3]  the election's observers' channel
-- Returns 1 when something was deleted or dropped (and the next woken), 0
-- when nothing was, or the name of a key of another type (nothing deleted).
local bad = foreign('hz')
if bad then
  return bad
end
local Q = {key = KEYS[2], ch = ARGV[1] .. ':'}
if redis.call('del', KEYS[1]) + unwake(Q) == 0 then
  return 0
end
local _, _, told = wake(Q, ARGV[2], 1, one)
vacated(KEYS[1], told, ARGV[2], ARGV[3])
return 1
