-- record: holder records, "<owner id>|<token>|<about>", where about is the
-- caller's "<grant request time, ms>|<client description>"; Inspect reads
-- them (docs/design.md, "Introspection"). Each lives with its hold: a Mutex's
-- in the key "<lock>:holder" with the lock's lease (renewed and deleted with
-- the lock), an RWMutex writer's in the field "#rec" of B:w, a reader's or
-- permit holder's in its side's records hash (leases.lua).
local function record_of(owner, token, about)
  return owner .. '|' .. token .. '|' .. (about or '')
end

-- describe writes a Mutex grant's record; a caller that passed no record key
-- (an older caller's key list) writes none.
local function describe(record, owner, token, about, lease)
  if record ~= nil then
    redis.call('set', record, record_of(owner, token, about), 'PX', lease)
  end
end
