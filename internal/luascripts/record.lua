-- record: holder records, "<owner id>|<token>|<about>", where about is the
-- caller's "<grant request time, ms>|<client description>"; Inspect reads
-- them (docs/design.md, "Introspection"). Each lives with its hold: a
-- Mutex's in the field "#rec" of the lock hash, an RWMutex writer's in the
-- field "#rec" of B:w (written by the HSET that grants, renewed with the
-- hash's expiry, deleted with the hash), a reader's or permit holder's in
-- its side's records hash (leases.lua). Fields starting with '#' are never
-- owners.
local function record_of(owner, token, about)
  return owner .. '|' .. token .. '|' .. (about or '')
end
