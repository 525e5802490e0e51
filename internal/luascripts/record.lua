-- record: the prelude of the scripts that grant a Mutex (acquire, and
-- release when it hands the lock to an heir).
--
-- A grant writes the lock's holder record, the string key "<lock>:holder":
-- "<owner id>|<token>|<about>", where about is the caller's
-- "<grant request time, ms>|<client description>", with the lease as its
-- expiry. Renewals keep it (it follows the lock in renew.lua), and every
-- script that deletes the lock deletes it, so it lives as long as the
-- hold. Inspect reads it (describe.lua). A caller that passed no record
-- key (an older caller's key list) writes none.
--
-- The grants of an RWMutex and a Semaphore record the same string in the
-- field "#rec" of a hash that lives exactly as long as the hold: the
-- write hold B:w, a reader's own key B:rd:<owner>, a permit holder's own
-- key B:h:<owner> (owner ids never start with '#'). So their records need
-- no key, expiry or renewal of their own.
local function record_of(owner, token, about)
  return owner .. '|' .. token .. '|' .. (about or '')
end

local function describe(record, owner, token, about, lease)
  if record ~= nil then
    redis.call('set', record, record_of(owner, token, about), 'PX', lease)
  end
end

-- live_records appends {owner, count, pttl, record} to out for each owner
-- in hash (skipping '#' fields) whose own key hash:<owner> still lives:
-- the holds of an RWMutex's readers or a Semaphore's holders, for Inspect.
local function live_records(hash, out)
  local kv = redis.call('hgetall', hash)
  for i = 1, #kv, 2 do
    local own = hash .. ':' .. kv[i]
    local p = string.sub(kv[i], 1, 1) ~= '#' and redis.call('pttl', own)
    if p and p ~= -2 then
      for _, v in ipairs({kv[i], kv[i + 1], p, redis.call('hget', own, '#rec') or ''}) do
        out[#out + 1] = v
      end
    end
  end
end
