-- describe: a Mutex's state for Inspect, changing nothing.
-- KEYS[1]  lock hash (acquire.lua's)
-- KEYS[2]  wait queue (queue.lua)
-- ARGV[1]  the most queued clients to return (> 0)
-- Returns a describe reply (inspect.lua); woken is the client a free lock is
-- kept for.
local Q, holds = {key = KEYS[2]}, {}
hash_holds(holds, '', KEYS[1])
return {holds, {queue_head('', Q, ARGV[1])}, 0, woken_of(Q) or ''}
