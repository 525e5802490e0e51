-- release: drop one hold; at the last, hand the lock to an heir or free it.
-- KEYS[1]  lock hash (acquire.lua's)   KEYS[2]  the lock's channel
-- KEYS[3]  fencing counter
-- KEYS[4]  wait queue (queue.lua)
-- ARGV[1]  owner id             ARGV[3]  wake spec (queue.lua)
-- ARGV[2]  the owner's hold count before this release (exact)
-- ARGV[4]  "1" if an earlier call with these arguments may have run
-- ARGV[5]  heir: a new owner id of the caller's client that gets the last
--          hold as a new grant, or "" or absent for none
-- ARGV[6]  the heir's lease in ms    ARGV[7]  the heir's about (record.lua)
-- ARGV[8]  "1" if the lock's TTL may exceed the heir's lease (record.lua)
-- Returns {n, 0}, n >= 1 holds left; {0, w} freed, w 1 when a message woke
-- a client (one in its window is not told again), else (and for a retry)
-- 0; {-1, 0} not held with
-- that count (nothing changed); {-3, token} handed to the heir.
local Q = {key = KEYS[4], ch = KEYS[2] .. ':'}
local reply, shorter = release_lock(KEYS[1], KEYS[3], ARGV[1], tonumber(ARGV[2]), ARGV[4] == '1', ARGV[5] or '', ARGV[6], ARGV[7], ARGV[8] == '1')
if shorter then
  -- The heir's lease ends first: the first client queued, told windowless,
  -- asks again and learns it (one probe; it wakes the rest as it releases).
  wake(Q, ARGV[3], 0, one, nil, true)
end
if reply then
  return reply
end
local _, _, woken = wake(Q, ARGV[3], 1, one)
return {0, woken}
