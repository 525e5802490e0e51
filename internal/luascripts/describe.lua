-- describe: a Mutex's state for Inspect, in one round trip, changing nothing.
--
-- KEYS[1]  lock hash            {owner id -> hold count}
-- KEYS[2]  holder record        (see record.lua)
-- KEYS[3]  wait queue           (see queue.lua)
-- KEYS[4]  reservation          (see queue.lua)
-- KEYS[5]  the wait queue's description hash (see queue.lua)
-- ARGV[1]  the most queued clients to return (> 0)
--
-- Returns {pttl, {owner, count, ...}, record, queue, reserved}: pttl is the
-- lock's (-2: no lock, -1: no expiry), record "" when there is none, queue
-- queue_head's description of the oldest ARGV[1] queued clients (see
-- queue.lua), reserved the client the free lock waits for, or "".
local lock, record, queue, reservation, desc = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
return {
  redis.call('pttl', lock),
  redis.call('hgetall', lock),
  redis.call('get', record) or '',
  queue_head(queue, desc, tonumber(ARGV[1])),
  redis.call('get', reservation) or '',
}
