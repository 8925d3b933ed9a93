-- Re-seeds a topic's counter and allocates again for a send whose seq was already taken in the
-- event store (Redis lost keys, or another node wrote it). The claim belongs to this send already;
-- it is refreshed as pending, with the new seq, in case it was lost with the counter.
-- KEYS[1] claim key, KEYS[2] counter
-- ARGV[1] floor (the highest seq stored for the topic), ARGV[2] pending value without its closing
-- brace, ARGV[3] pending TTL ms.
-- Returns the new seq.
local floor = tonumber(ARGV[1])
local cur = redis.call('GET', KEYS[2])
if (not cur) or tonumber(cur) < floor then
  redis.call('SET', KEYS[2], ARGV[1])
end
local seq = redis.call('INCR', KEYS[2])
redis.call('SET', KEYS[1], ARGV[2] .. ',"seq":' .. string.format('%d', seq) .. '}', 'PX', ARGV[3])
return seq
