-- semacquire: a new owner takes n permits of a Semaphore, or learns how long to wait.
-- KEYS[1..5]  semqueue.lua's
-- ARGV[1]  base key B           ARGV[2]  owner id (new)
-- ARGV[3]  permits n, 1..size   ARGV[4]  the caller's size (>= 1)
-- ARGV[5]  lease in ms (> 0)    ARGV[6]  the caller's queue entry
-- ARGV[7]  "1" to queue the client if refused (and dequeue it if granted)
-- ARGV[8]  wake spec (queue.lua)    ARGV[9]  about (record.lua)
-- Returns {1, 0} (no token), else queue.lua's refusal with the first holder
-- to end's record (refused only for queued clients, it wakes those that
-- fit); {-1, size} when in use with another size (nothing changed).
local owner, n, size = ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4])
local lease, client, queued, spec = tonumber(ARGV[5]), ARGV[6], ARGV[7] == '1', ARGV[8]
check_types(holders)
redis.call('hlen', qn) -- written beside a refusal's queue entry
local now = server_ms()
local held, recorded = sem_held(now)
recorded = sem_size(recorded)
if recorded and recorded ~= size then
  if held > 0 or redis.call('exists', Q.key) == 1 then
    return {-1, recorded}
  end
  redis.call('del', h, qn) -- nobody holds or waits: the old size is gone
end
local prev = tonumber(redis.call('hget', qn, client))
local ahead, mine = sem_ahead(client)
-- left is the named holder's lease left; the wait (pttl) may be shorter,
-- a woken client's window.
local pttl, left, holder = -2, -1, nil
-- walked: the queue was walked up to the caller, dropping the woken
-- clients whose window lapsed; granted, the caller walks on past itself.
local walked = false
if held + n > size then
  left, holder = first_end(holders, now)
  pttl = left
elseif held + n + ahead > size then
  local _, first = sem_wake(spec, size - held, client)
  walked = true
  ahead, mine = sem_ahead(client)
  if held + n + ahead > size then
    left, holder = first_end(holders, now)
    pttl = wait_for(first, left)
  end
end
if pttl ~= -2 then
  local reply = refused(queued, Q, client, pttl, holder, left)
  if queued then
    redis.call('hset', qn, client, n, '#size', size)
    redis.call('pexpire', qn, redis.call('pttl', Q.key))
  end
  return reply
end
-- owner is new: its permits add to the total.
redis.call('hset', h, owner, n, '#size', size, '#held', held + n)
lease_start(holders, owner, now, lease, record_of(owner, 0, ARGV[9]))
if queued and mine then
  dequeue(Q, client)
  local free = size - held - n
  if free > 0 and (walked or prev and prev > n) then
    -- Those behind it may fit now: it took the place of clients its walk
    -- dropped, whose permits no wake-up since has offered (nor told anyone
    -- to watch the windows left), or it took less than its entry wanted.
    -- A caller granted in its own window needs no walk: its permits were
    -- set aside for it, and the next client was told then.
    sem_wake(spec, free)
  end
end
return {1, 0}
