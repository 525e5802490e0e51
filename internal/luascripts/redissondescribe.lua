-- redissondescribe: a Redisson-format lock's state for Inspect, changing
-- nothing: holders only, without records; no queue.
-- KEYS[1]  lock hash
-- ARGV[1]  the most queued clients to return (unused)
-- Returns a describe reply (inspect.lua): {holds, {}, 0, ""}.
local holds = {}
hash_holds(holds, '', KEYS[1])
return {holds, {}, 0, ''}
