-- elect: a campaigner asks to lead. acquire.lua (the function acquire)
-- grants or refuses; a grant also stores the leader's value in the lock
-- hash's field "#val" (it lives, is renewed and goes with the lock) and
-- tells the observers, so that Observe needs no polling.
-- KEYS[1..4], ARGV[1..7]  acquire.lua's (ARGV[6] also says how to publish)
-- ARGV[8]  the value           ARGV[9]  the observers' channel
-- Returns acquire.lua's reply.
local r = acquire(KEYS, {unpack(ARGV, 1, 7)})
if r[1] == 1 then
  redis.call('hset', KEYS[1], '#val', ARGV[8])
  -- notify.WakeAllPayload: every observer of every process wakes and reads.
  redis.call(publisher(ARGV[6]), ARGV[9], 'all')
end
return r
