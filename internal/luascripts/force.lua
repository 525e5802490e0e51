-- force: the prelude of the force-unlock scripts, after queue.lua's.

-- unwake drops Q's woken clients (for a force-unlock: told, they have not
-- come, and may never) and returns how many, and how many of them had their
-- window open: the free lock was kept for those, not for one whose window
-- passed (nobody's, as a dead holder is).
local function unwake(Q)
  local woken = redis.call('zrangebyscore', Q.key, '-inf', '(0', 'WITHSCORES')
  local now, open = server_ms(), 0
  for i = 1, #woken, 2 do
    dequeue(Q, woken[i])
    if -tonumber(woken[i + 1]) >= now then
      open = open + 1
    end
  end
  return #woken / 2, open
end

-- foreign returns the first of KEYS holding another type than types says
-- (a letter a key: h hash, z sorted set, s string, - unchecked), or nil:
-- force-unlock scripts delete nothing latchkey did not write (an
-- application's key under the prefix, say).
local function foreign(types)
  local read = {h = 'hlen', z = 'zcard', s = 'get'}
  for i = 1, #types do
    local cmd = read[string.sub(types, i, i)]
    if cmd then
      local r = redis.pcall(cmd, KEYS[i])
      if type(r) == 'table' and r.err then
        return KEYS[i]
      end
    end
  end
  return nil
end
