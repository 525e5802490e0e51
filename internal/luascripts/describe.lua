-- describe: a Mutex's state for Inspect, in one round trip, changing nothing.
--
-- KEYS[1]  lock hash            {owner id -> hold count, "#rec" -> the
--          holder record (record.lua)}
-- KEYS[2]  wait queue           (see queue.lua)
-- KEYS[3]  the wait queue's description hash (see queue.lua)
-- ARGV[1]  the most queued clients to return (> 0)
--
-- Returns a describe reply (queue.lua) with the woken client whose window
-- is open: the one a free lock is kept for.
local Q, holds = {key = KEYS[2], desc = KEYS[3]}, {}
hash_holds(holds, '', KEYS[1], redis.call('hget', KEYS[1], '#rec') or '')
return {holds, {queue_head('', Q, ARGV[1])}, 0, woken_of(Q) or ''}
