-- electread: who leads, for Leader and Observe, in one atomic read.
--
-- KEYS[1]  lock hash, whose field "#rec" is the holder record (record.lua)
-- KEYS[2]  the value key (elect.lua)
--
-- Returns {pttl, record, value}: the lock's lease left in ms (-2: nobody
-- leads; -1: no expiry), and the record and the value, "" when absent.
local pttl = redis.call('pttl', KEYS[1])
if pttl == -2 then
  return {pttl, '', ''}
end
return {pttl, redis.call('hget', KEYS[1], '#rec') or '', redis.call('get', KEYS[2]) or ''}
