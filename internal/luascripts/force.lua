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

-- An owner id, a lock hash's field for one owner's holds, is "<client
-- UUID>:<n>": rlock's (Client.newOwner), and Redisson's "<UUID>:<thread
-- id>". Fields starting with '#' ("#rec", "#held", "#size") are the
-- lock's own; an owner's never does.
local uuid = string.rep('%x', 8) .. '%-' .. string.rep('%x', 4) .. '%-' .. string.rep('%x', 4) .. '%-'
  .. string.rep('%x', 4) .. '%-' .. string.rep('%x', 12)
local owner_id = '^' .. uuid .. ':%d+$'

-- shaped reports whether the key of kind letter (foreign's) holds what
-- latchkey writes there, or nothing; r is its type check's reply. Only
-- the whole content tells a lock from an application's key of the same
-- type: an application's hash of integers, an RMap or a Redisson
-- RReadWriteLock ("mode" -> "read") would pass a type check, and a
-- force-unlock deletes them.
local function shaped(kind, key, r)
  if type(r) == 'table' and r.err then
    return false
  end
  if r == 0 then
    return true -- an empty hash or set: there is none
  end
  if kind == 'h' or kind == 'r' then
    -- h: a hold hash {owner id -> count, '#...' -> the lock's}; r: a
    -- records hash {owner id -> record}, whose records, like '#rec', are
    -- the lock's to read (Inspect reports one it cannot).
    local kv = redis.call('hgetall', key)
    for i = 1, #kv, 2 do
      local f = kv[i]
      if kind == 'r' or string.sub(f, 1, 1) ~= '#' then
        if not string.find(f, owner_id) or (kind == 'h' and not string.find(kv[i + 1], '^%-?%d+$')) then
          return false
        end
      end
    end
  elseif kind == 'e' then
    -- A lease set {owner id -> lease end}, read in pages: an application's
    -- large set fails on its first.
    for i = 0, r - 1, 1000 do
      for _, m in ipairs(redis.call('zrange', key, i, i + 999)) do
        if not string.find(m, owner_id) then
          return false
        end
      end
    end
  elseif kind == 'w' then
    -- A Semaphore's wants {queue entry -> permits, "#size" -> size}: its
    -- fields are the queue's; only integers are written to it.
    local kv = redis.call('hgetall', key)
    for i = 2, #kv, 2 do
      if not string.find(kv[i], '^%-?%d+$') then
        return false
      end
    end
  end
  return true
end

-- foreign returns the first of KEYS that is not of the shape types says,
-- or nil: force-unlock scripts delete nothing latchkey did not write (an
-- application's key under a wrong prefix, say). A letter a key: h hold
-- hash, r records hash (leases.lua), e lease set, w a Semaphore's wants
-- (semqueue.lua), z sorted set (a wait queue: its type only), s string, -
-- unchecked. The shape checks read their keys whole: O(holders and
-- wants), which force-unlock, a recovery, can pay.
local function foreign(types)
  local read = {h = 'hlen', r = 'hlen', w = 'hlen', e = 'zcard', z = 'zcard', s = 'get'}
  for i = 1, #types do
    local kind = string.sub(types, i, i)
    local cmd = read[kind]
    if cmd and not shaped(kind, KEYS[i], redis.pcall(cmd, KEYS[i])) then
      return KEYS[i]
    end
  end
  return nil
end
