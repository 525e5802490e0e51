-- forceunlock: delete a Mutex whoever holds it, drop the woken clients that
-- have not come (unwake), and wake the next as a release would. An
-- election's observers are told as a resignation tells them (vacated): the
-- lock is its leader's.
-- KEYS[1..2]  describe.lua's
-- ARGV[1]  the lock's channel   ARGV[2]  wake spec (queue.lua)
-- ARGV[3]  the election's observers' channel
-- Returns 1 when a hold, or a woken client's open window, was deleted, else
-- 0 (dropping only windows that passed is no force-unlock, though the next
-- is woken all the same), or the name of a key that is not latchkey's
-- (force.lua's foreign: another type, or a hash not of a lock's shape;
-- nothing deleted).
local bad = foreign('hz')
if bad then
  return bad
end
local Q = {key = KEYS[2], ch = ARGV[1] .. ':'}
local held = redis.call('del', KEYS[1])
local dropped, open = unwake(Q)
if held + dropped == 0 then
  return 0
end
local _, _, told = wake(Q, ARGV[2], 1, one)
vacated(KEYS[1], told, ARGV[2], ARGV[3])
return math.min(held + open, 1)
