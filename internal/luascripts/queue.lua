-- queue: the prelude of the scripts that queue waiting clients or wake them.
--
-- Waiters do not all listen on one channel. Each client that has waiters on
-- a lock subscribes to "<channel>:<client id>" and queues its id in the
-- lock's wait queue (a ZSET scored by the server time it queued at, so the
-- oldest comes first). Freeing the lock pops queued clients, oldest first,
-- and publishes to each until one has a subscriber: exactly one client is
-- woken per release, and it wakes one of its waiters. A client that died or
-- stopped waiting has no subscriber any more (the publish reaches 0
-- receivers) and is skipped, so a stale entry costs one publish, not a lost
-- wake-up.
--
-- The woken client gets a handoff: the lock key is kept for a short window
-- holding only the field HANDOFF = its id, so that nobody else (the
-- releasing goroutine asking again at once, say) takes the lock in the
-- time the wake-up needs to arrive. That is what makes the queue fair and
-- spares the woken waiter a failed try. An owner id never equals HANDOFF.
local HANDOFF = '#handoff'

-- enqueue puts client at the back of queue unless it is already queued
-- (NX: it keeps its place), and keeps the queue for at least ttl ms.
local function enqueue(queue, client, ttl)
  local now = redis.call('time')
  redis.call('zadd', queue, 'NX', now[1] * 1000000 + now[2], client)
  if redis.call('pttl', queue) < ttl then
    redis.call('pexpire', queue, ttl)
  end
end

-- wake publishes msg to the oldest queued client that still listens and,
-- with handoff > 0 (ms), reserves the freed lock key for it. A client
-- named skip (one yielding its turn) is passed over and queued again at
-- the back. It returns the client woken, or nil.
local function wake(key, queue, channel, sharded, msg, handoff, skip)
  local publish = 'publish'
  if sharded then
    publish = 'spublish'
  end
  local skipped, ttl = false, 0
  if skip then
    ttl = redis.call('pttl', queue)
  end
  local woken = nil
  while true do
    local head = redis.call('zpopmin', queue)
    if head[1] == nil then
      break
    end
    if head[1] == skip then
      skipped = true
    elseif redis.call(publish, channel .. ':' .. head[1], msg) > 0 then
      woken = head[1]
      if handoff > 0 then
        redis.call('hset', key, HANDOFF, woken)
        redis.call('pexpire', key, handoff)
      end
      break
    end
  end
  if skipped then
    enqueue(queue, skip, ttl)
  end
  return woken
end

