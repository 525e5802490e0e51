-- elect: a campaigner asks to lead through acquire.lua (the function
-- acquire); a grant also stores the value in the lock hash's field "#val"
-- (it lives with the lock) and tells the observers: Observe needs no polls.
-- KEYS[1..3], ARGV[1..7]  acquire.lua's (ARGV[6] also says how to publish)
-- ARGV[8]  the value           ARGV[9]  the observers' channel
-- Returns acquire.lua's reply.
local r = acquire(KEYS, {unpack(ARGV, 1, 7)})
if r[1] == 1 then
  redis.call('hset', KEYS[1], '#val', ARGV[8])
  announce(ARGV[6], ARGV[9])
end
return r
