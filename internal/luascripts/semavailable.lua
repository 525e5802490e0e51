-- semavailable: how many permits of a Semaphore are free.
--
-- KEYS[1]  holders B:h          KEYS[2]  wants B:qn (see semqueue.lua)
-- ARGV[1]  the caller's size
--
-- Drops holders whose lease ran out. Returns {free, 0}, or {-1, size} when
-- the semaphore is in use with another size.
local h, qn, size = KEYS[1], KEYS[2], tonumber(ARGV[1])
local held = sem_held(h)
sem_settle(h)
local recorded = sem_size(h, qn)
if recorded and recorded ~= size then
  return {-1, recorded}
end
return {size - held, 0}
