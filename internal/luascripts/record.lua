-- record: a lock hash's grants and releases, and holder records
-- "<owner id>|<token>|<about>", about being the caller's "<ms requested>|
-- <client description>" (docs/design.md, "Introspection"). A record lives
-- with its hold: a lock hash's (Mutex, RWMutex B:w) field "#rec" ('#':
-- never an owner), or a lease side's records hash (leases.lua).
local function record_of(owner, token, about)
  return owner .. '|' .. token .. '|' .. (about or '')
end

-- grant gives lock to owner with a new fencing token, which it returns, and
-- a lease of lease ms; about false writes no record (Redisson's format).
local function grant(lock, fence, owner, lease, about)
  local token = redis.call('incr', fence)
  if about == false then
    redis.call('hset', lock, owner, 1)
  else
    redis.call('hset', lock, owner, 1, '#rec', record_of(owner, token, about))
  end
  redis.call('pexpire', lock, lease)
  return token
end

-- release_count drops one of owner's n holds in hash: it returns the holds
-- left (-1: owner does not hold n) and whether an earlier run did it (with
-- retry, the state it would leave is taken as its doing: owner ids are
-- never reused). At 0 the field goes, unless keep (the caller DELs hash).
local function release_count(hash, owner, n, retry, keep)
  local count = tonumber(redis.call('hget', hash, owner))
  if count ~= n then
    if retry and ((n > 1 and count == n - 1) or (n == 1 and count == nil)) then
      return n - 1, true
    end
    return -1, false
  end
  if n > 1 then
    write_first(hash)
    return redis.call('hincrby', hash, owner, -1), false
  end
  if not keep then
    redis.call('hdel', hash, owner)
  end
  return 0, false
end

-- release_lock is release.lua's and Redisson's release: one hold less; at
-- the last the hash goes, or passes to heir. It returns the reply ({left,
-- 0} or {-3, token}), or nil when the lock was freed (the caller wakes),
-- and whether the heir's lease ends before the TTL waiters were told: then
-- the caller tells them, for no release may come when that lease ends.
-- check: the caller cannot rule that out (else no PTTL is read).
local function release_lock(lock, fence, owner, n, retry, heir, lease, about, check)
  local left, earlier = release_count(lock, owner, n, retry, true)
  if earlier and left == 0 and heir ~= '' and redis.call('hexists', lock, heir) == 1 then
    return {-3, tonumber(redis.call('get', fence)) or 0}
  end
  if left ~= 0 or earlier then
    return {left, 0}
  end
  local told = heir ~= '' and check and redis.call('pttl', lock)
  redis.call('del', lock)
  if heir ~= '' then
    return {-3, grant(lock, fence, heir, lease, about)}, told and (told == -1 or told > tonumber(lease))
  end
  return nil
end
