-- elect: a campaigner asks to lead. The Mutex's acquire (acquire.lua, run
-- first as the function acquire, on KEYS[1..4] and ARGV[1..7]) grants or
-- refuses; a grant also stores the leader's value beside the lock (whose
-- "#rec" is the holder record) and tells the observers, so that Observe
-- needs no polling.
--
-- KEYS[1..4] acquire.lua's
-- KEYS[5]    the value key: "<owner id>|<value>", with the grant's lease.
--            It follows the lock (the watchdog renews it with the lock) and
--            names its owner, so a reader can tell it from a stale one.
-- ARGV[1..7] acquire.lua's (ARGV[6], the wake spec, also says how
--            observers are told)
-- ARGV[8]    the value
-- ARGV[9]    the observers' channel (same hash tag)
--
-- Returns acquire.lua's reply.
local r = acquire({unpack(KEYS, 1, 4)}, {unpack(ARGV, 1, 7)})
if r[1] == 1 then
  redis.call('set', KEYS[5], ARGV[1] .. '|' .. ARGV[8], 'PX', ARGV[2])
  -- notify.WakeAllPayload: every observer of every process wakes and reads.
  redis.call(publisher(ARGV[6]), ARGV[9], 'all')
end
return r
