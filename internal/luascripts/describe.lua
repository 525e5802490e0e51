-- describe: a Mutex's state for Inspect, in one round trip, changing nothing.
--
-- KEYS[1]  lock hash            {owner id -> hold count}
-- KEYS[2]  wait queue           (see queue.lua)
-- KEYS[3]  reservation          (see queue.lua)
-- KEYS[4]  holder record        (see record.lua)
-- KEYS[5]  the wait queue's description hash (see queue.lua)
-- ARGV[1]  the most queued clients to return (> 0)
--
-- Returns a describe reply (queue.lua) with the client the free lock is
-- reserved for.
local holds = {}
hash_holds(holds, '', KEYS[1], redis.call('get', KEYS[4]) or '')
return {holds, {queue_head('', KEYS[2], KEYS[5], ARGV[1])}, 0, redis.call('get', KEYS[3]) or ''}
