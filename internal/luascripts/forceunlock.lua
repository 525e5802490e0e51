-- forceunlock: delete the lock whoever holds it, and wake a waiter.
--
-- KEYS[1]  lock hash
-- KEYS[2]  the lock's channel (same hash tag as KEYS[1])
-- ARGV[1]  "s" to notify with SPUBLISH, anything else PUBLISH
--
-- Returns 1 when a lock was deleted (and a message published), 0 when there was
-- no lock (nothing published).
if redis.call('del', KEYS[1]) == 0 then
  return 0
end
if ARGV[1] == 's' then
  redis.call('spublish', KEYS[2], 'force')
else
  redis.call('publish', KEYS[2], 'force')
end
return 1
