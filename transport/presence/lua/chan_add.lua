-- Adds or refreshes a node in a zset of nodes with per-user channel sessions (a user's, or a
-- topic's watchers').
-- KEYS[1] the zset (node -> deadline ms, Redis clock); ARGV[1] node, ARGV[2] ttl ms
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local ttl = tonumber(ARGV[2])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
redis.call('ZADD', KEYS[1], now + ttl, ARGV[1])
redis.call('PEXPIRE', KEYS[1], ttl)
return 1
