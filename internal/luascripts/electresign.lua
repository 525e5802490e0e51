-- electresign: the leader steps down (or a grant of unknown outcome is
-- undone) through release.lua (the function release), never with an heir:
-- leadership goes to the oldest campaigner queued, which it wakes. When
-- nobody was woken, the observers are told, so that they read "no leader".
-- KEYS[1..4], ARGV[1..4]  release.lua's
-- ARGV[5]  the observers' channel
-- Returns release.lua's reply.
local r = release(KEYS, {unpack(ARGV, 1, 4)})
-- A retry reports {0, 0} too, perhaps after another's grant: that one was
-- announced already, and vacated finds its lock.
if r[1] == 0 then
  vacated(KEYS[1], r[2], ARGV[3], ARGV[5])
end
return r
