-- queue: the prelude of the scripts that queue waiting clients or wake them.
--
-- A client with waiters on a lock subscribes to "<channel>:<client id>" and,
-- once refused, queues its id in the lock's wait queue: a ZSET scored by the
-- server time it queued at, so the oldest comes first. Freeing the lock pops
-- queued clients, oldest first, and publishes to each until one has a
-- subscriber (PUBLISH counts receivers): one client is woken per release. A
-- client that died has no subscriber and costs one publish.
--
-- The woken client gets a reservation: the key "<lock>:r" holds its id for a
-- short window (PX), in which only that client may take the free lock, so
-- that the goroutine that just released cannot barge in before the wake-up
-- arrives.

-- enqueue puts client at the back of queue unless it is already queued (NX:
-- it keeps its place), and keeps the queue at least ttl ms, so that it
-- outlives every waiter's TTL-bounded wait but not an abandoned lock.
local function enqueue(queue, client, ttl)
  local now = redis.call('time')
  redis.call('zadd', queue, 'NX', now[1] * 1000000 + now[2], client)
  if redis.call('pttl', queue) < ttl then
    redis.call('pexpire', queue, ttl)
  end
end

-- wake publishes to the oldest queued client that still listens and
-- reserves the free lock for it. spec is the caller's wake argument: "p"
-- (PUBLISH) or "s" (SPUBLISH, Cluster) followed by the reservation window in
-- ms, 0 for none; one argument instead of two keeps the hot path's calls
-- short. It returns the client woken, or nil when nobody listens.
local function wake(queue, channel, reservation, spec)
  local publish = 'publish'
  if string.sub(spec, 1, 1) == 's' then
    publish = 'spublish'
  end
  local window = tonumber(string.sub(spec, 2))
  while true do
    local head = redis.call('zpopmin', queue)
    if head[1] == nil then
      return nil
    end
    if redis.call(publish, channel .. ':' .. head[1], 'unlock') > 0 then
      if window > 0 then
        redis.call('set', reservation, head[1], 'PX', window)
      end
      return head[1]
    end
  end
end
