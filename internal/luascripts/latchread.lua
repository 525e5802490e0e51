-- latchread: read a count-down latch, changing nothing.
-- KEYS[1]  latch hash (latchset.lua's)
-- Returns {count, round} as stored strings (a count can pass Lua's exact
-- 2^53), nil when absent. HGETs, not HMGET: the commands the ACL has.
return {redis.call('hget', KEYS[1], 'count'), redis.call('hget', KEYS[1], 'round')}
