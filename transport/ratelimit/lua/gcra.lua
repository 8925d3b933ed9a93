-- GCRA for one key, with the server's clock so every node agrees.
-- KEYS[1] the key; ARGV[1] emission interval in ms (period / limit), ARGV[2] burst.
-- The key holds the theoretical arrival time (TAT) in ms. Returns 0 when the request is allowed
-- (and counted), otherwise the ms to wait before the same request would pass (nothing counted).
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + tonumber(t[2]) / 1000
local interval = tonumber(ARGV[1])
local burst = tonumber(ARGV[2])
local tat = tonumber(redis.call('GET', KEYS[1]) or now)
if tat < now then
  tat = now
end
local new_tat = tat + interval
local allow_at = new_tat - burst * interval
if now < allow_at then
  return math.ceil(allow_at - now)
end
redis.call('SET', KEYS[1], string.format('%.3f', new_tat), 'PX', math.ceil(new_tat - now) + 1)
return 0
