-- Reads whether a user is a live online member of a topic, on any node.
-- KEYS[1] topic members zset (uid -> deadline ms, Redis clock); ARGV[1] uid
-- Returns 1 or 0.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local s = redis.call('ZSCORE', KEYS[1], ARGV[1])
if s and tonumber(s) > now then
  return 1
end
return 0
