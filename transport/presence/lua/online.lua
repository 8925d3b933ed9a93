-- Marks one session online, or refreshes it.
-- KEYS[1] user hash, KEYS[2] user sessions zset (session id -> deadline in ms, Redis clock)
-- ARGV[1] session id, ARGV[2] ttl ms, ARGV[3] hash ttl ms, ARGV[4] node ('' keeps it), ARGV[5] ua ('' keeps it)
-- Returns the number of live sessions.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local ttl = tonumber(ARGV[2])
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
redis.call('ZADD', KEYS[2], now + ttl, ARGV[1])
redis.call('PEXPIRE', KEYS[2], ttl)
local n = redis.call('ZCARD', KEYS[2])
redis.call('HSET', KEYS[1], 'status', 'online', 'sessions', n, 'last_active_at', now)
if ARGV[4] ~= '' then
  redis.call('HSET', KEYS[1], 'node', ARGV[4])
end
if ARGV[5] ~= '' then
  redis.call('HSET', KEYS[1], 'ua', ARGV[5])
end
redis.call('PEXPIRE', KEYS[1], tonumber(ARGV[3]))
return n
