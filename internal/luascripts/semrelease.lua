-- semrelease: an owner gives back all its permits of a Semaphore, and the
-- waiters the freed permits can serve are woken.
--
-- KEYS[1]  holders B:h          KEYS[2]  queue B:q (see semqueue.lua)
-- KEYS[3]  wants B:qn
-- ARGV[1]  base key B           ARGV[2]  owner id
-- ARGV[3]  the caller's size    ARGV[4]  wake spec, "p" or "s"
-- ARGV[5]  "1" if an earlier call with these arguments may have run
--
-- Returns {status, woken}: status 0 when released, -1 when the owner held
-- nothing (its hold had lapsed: its leftovers are cleared), and how many
-- queued clients were told. A retry that finds the owner wholly gone takes
-- it for its own earlier run and reports 0.
local h, q, qn = KEYS[1], KEYS[2], KEYS[3]
local base, owner, spec, retry = ARGV[1], ARGV[2], ARGV[4], ARGV[5] == '1'
local own = h .. ':' .. owner
local has_own, has_field = redis.call('exists', own) == 1, redis.call('hexists', h, owner) == 1
local result = 0
if not (has_own and has_field) and not (retry and not has_own and not has_field) then
  result = -1
end
redis.call('del', own)
redis.call('hdel', h, owner)
local size = sem_size(h, qn) or tonumber(ARGV[3])
local held = sem_held(h)
sem_settle(h)
local woken = 0
if size > held then
  woken = sem_wake(base, spec, size - held, nil)
end
return {result, woken}
