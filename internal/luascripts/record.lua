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
-- The grants of an RWMutex and a Semaphore record the same string where
-- the hold's other state lives: the write hold's in the field "#rec" of
-- B:w (owner ids never start with '#'), a reader's or a permit holder's in
-- its side's records hash, under its owner id, which every script that
-- ends the owner's lease clears (leases.lua). So a record goes with its
-- hold, and needs no expiry or renewal of its own.
local function record_of(owner, token, about)
  return owner .. '|' .. token .. '|' .. (about or '')
end

local function describe(record, owner, token, about, lease)
  if record ~= nil then
    redis.call('set', record, record_of(owner, token, about), 'PX', lease)
  end
end
