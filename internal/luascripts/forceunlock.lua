-- forceunlock: delete the lock whoever holds it, and wake a waiter.
--
-- KEYS[1]  lock hash
-- KEYS[2]  the lock's channel (same hash tag as KEYS[1]; waiters listen on
--          "<channel>:<client id>", see queue.lua)
-- KEYS[3]  the lock's wait queue (same hash tag)
-- ARGV[1]  "s" to notify with SPUBLISH, anything else PUBLISH
--
-- Returns 1 when a lock was deleted (and the oldest live waiting client
-- woken, without a handoff window), 0 when there was no lock (nothing
-- published).
if redis.call('del', KEYS[1]) == 0 then
  return 0
end
wake(KEYS[1], KEYS[3], KEYS[2], ARGV[1] == 's', 'force', 0)
return 1
