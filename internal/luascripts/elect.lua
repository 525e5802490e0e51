-- elect: a campaigner asks to lead. The Mutex's acquire (acquire.lua, run
-- first as the function acquire, on KEYS[1..4] and ARGV[1..7]) grants or
-- refuses; a grant also stores the leader's value in the lock hash (field
-- "#val", beside the holder record "#rec": it has the lock's lease, is
-- renewed with it and goes with it) and tells the observers, so that
-- Observe needs no polling.
--
-- KEYS[1..4] acquire.lua's
-- ARGV[1..7] acquire.lua's (ARGV[6], the wake spec, also says how
--            observers are told)
-- ARGV[8]    the value
-- ARGV[9]    the observers' channel (same hash tag)
--
-- Returns acquire.lua's reply.
local r = acquire(KEYS, {unpack(ARGV, 1, 7)})
if r[1] == 1 then
  redis.call('hset', KEYS[1], '#val', ARGV[8])
  -- notify.WakeAllPayload: every observer of every process wakes and reads.
  redis.call(publisher(ARGV[6]), ARGV[9], 'all')
end
return r
