-- Removes one session; the last live session going marks the user offline.
-- KEYS[1] user hash, KEYS[2] user sessions zset
-- ARGV[1] session id, ARGV[2] hash ttl ms
-- Returns the number of live sessions left.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZREM', KEYS[2], ARGV[1])
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
local n = redis.call('ZCARD', KEYS[2])
if n == 0 then
  redis.call('HSET', KEYS[1], 'status', 'offline', 'sessions', 0, 'last_seen_at', now, 'last_active_at', now)
else
  redis.call('HSET', KEYS[1], 'sessions', n)
end
redis.call('PEXPIRE', KEYS[1], tonumber(ARGV[2]))
return n
