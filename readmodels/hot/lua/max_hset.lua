-- Raise hash fields: for each pair ARGV[i] field, ARGV[i+1] value, set the field only if the value
-- is higher than the stored one (a missing field counts as -1, so 0 creates it). The last ARGV is
-- the hash's ttl ms, renewed either way.
local n = #ARGV - 1
for i = 1, n, 2 do
  local cur = tonumber(redis.call('HGET', KEYS[1], ARGV[i]) or '-1')
  if tonumber(ARGV[i + 1]) > cur then
    redis.call('HSET', KEYS[1], ARGV[i], ARGV[i + 1])
  end
end
redis.call('PEXPIRE', KEYS[1], ARGV[#ARGV])
return 1
