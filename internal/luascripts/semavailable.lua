-- semavailable: how many permits of a Semaphore are free.
--
-- KEYS[1]  holders B:h          KEYS[2]  queue B:q (see semqueue.lua)
-- ARGV[1]  the caller's size
--
-- Drops holders whose lease ran out. Returns {free, 0}, or {-1, size} when
-- the semaphore is in use with another size.
local h, q, size = KEYS[1], KEYS[2], tonumber(ARGV[1])
local held = sem_held(h)
sem_settle(h, q)
local recorded = tonumber(redis.call('hget', h, '#size'))
if recorded and recorded ~= size then
  return {-1, recorded}
end
return {size - held, 0}
