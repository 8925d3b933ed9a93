-- Raises a topic's seq counter to at least a floor taken from the event store, atomically.
-- KEYS[1] counter; ARGV[1] floor (the highest seq stored for the topic).
-- The counter never moves backwards. Returns the counter after the call.
local floor = tonumber(ARGV[1])
local cur = redis.call('GET', KEYS[1])
if (not cur) or tonumber(cur) < floor then
  redis.call('SET', KEYS[1], ARGV[1])
  return floor
end
return tonumber(cur)
