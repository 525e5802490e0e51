-- clock: the prelude of every script that reads the server's time (before
-- the others). server_us is the server's clock in us, server_ms in ms (what
-- PEXPIRE counts): one TIME per script, however often they are asked.
local time_now
local function server_us()
  if not time_now then
    local t = redis.call('time')
    time_now = tonumber(t[1]) * 1000000 + tonumber(t[2])
  end
  return time_now
end

local function server_ms()
  return math.floor(server_us() / 1000)
end
