-- announce: the prelude of the scripts that tell an election's observers
-- (elect.lua, electresign.lua, forceunlock.lua), after queue.lua's.

-- announce tells every observer of every process to read the leader
-- again: notify.WakeAllPayload on the observers' channel, published as
-- the wake spec says (queue.lua).
local function announce(spec, observers)
  redis.call(publisher(spec), observers, 'all')
end

-- vacated announces that nobody leads once lock is gone, unless a message
-- (told of them) woke a waiter: a campaigner announces its own grant.
local function vacated(lock, told, spec, observers)
  if told == 0 and redis.call('exists', lock) == 0 then
    announce(spec, observers)
  end
end
