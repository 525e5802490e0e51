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
local function describe(record, owner, token, about, lease)
  if record ~= nil then
    redis.call('set', record, owner .. '|' .. token .. '|' .. (about or ''), 'PX', lease)
  end
end
