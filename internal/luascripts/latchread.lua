-- latchread: read a count-down latch in one round trip, changing nothing.
--
-- KEYS[1]  latch hash           {count -> n, round -> id}
--
-- Returns {count, round} as stored (strings: a count can exceed the 2^53 that
-- Lua's numbers hold exactly), each nil when absent; both nil when there is
-- no latch. HGET rather than HMGET: the commands latchkey already needs.
return {redis.call('hget', KEYS[1], 'count'), redis.call('hget', KEYS[1], 'round')}
