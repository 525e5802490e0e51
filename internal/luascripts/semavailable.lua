-- semavailable: how many permits of a Semaphore are free.
-- KEYS[1..5]  semqueue.lua's
-- ARGV[1]  the caller's size
-- Drops dead holders. Returns {free, 0}, or {-1, size} when the semaphore
-- is in use with another size.
local size = tonumber(ARGV[1])
local held, recorded = sem_held(server_ms())
recorded = sem_size(recorded)
if recorded and recorded ~= size then
  return {-1, recorded}
end
return {size - held, 0}
