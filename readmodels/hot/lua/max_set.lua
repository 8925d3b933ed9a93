-- Raise a counter: set KEYS[1] to ARGV[1] only if that is higher; renew the TTL either way.
-- ARGV[2] ttl ms. Returns the value now stored.
local cur = tonumber(redis.call('GET', KEYS[1]) or '-1')
local v = tonumber(ARGV[1])
if v > cur then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
  return v
end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return cur
