-- GCRA for one key, with the server's clock so every node agrees.
-- KEYS[1] the key; ARGV[1] emission interval in ms (period / limit), ARGV[2] burst, ARGV[3] how
-- many requests to count at once (a node's lease; at least 1).
-- The key holds the theoretical arrival time (TAT) in ms. Counts ARGV[3] requests when they all
-- fit, else one when it fits. Returns {counted, 0}, or {0, ms to wait} when not even one fits
-- (nothing counted).
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + tonumber(t[2]) / 1000
local interval = tonumber(ARGV[1])
local burst = tonumber(ARGV[2])
local tat = tonumber(redis.call('GET', KEYS[1]) or now)
if tat < now then
  tat = now
end
local n = tonumber(ARGV[3])
local new_tat = tat + n * interval
if now < new_tat - burst * interval then
  n = 1
  new_tat = tat + interval
  if now < new_tat - burst * interval then
    return {0, math.ceil(new_tat - burst * interval - now)}
  end
end
redis.call('SET', KEYS[1], string.format('%.3f', new_tat), 'PX', math.ceil(new_tat - now) + 1)
return {n, 0}
