-- electread: who leads, for Leader and Observe, in one atomic read.
-- KEYS[1]  lock hash, with "#rec" (record.lua) and "#val" (elect.lua)
-- Returns {pttl, record, value}: the lease left in ms (-2: nobody leads;
-- -1: no expiry), the record and the value ("" when absent).
local f = redis.call('hmget', KEYS[1], '#rec', '#val')
return {redis.call('pttl', KEYS[1]), f[1] or '', f[2] or ''}
