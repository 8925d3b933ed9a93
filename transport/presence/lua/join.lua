-- Adds or refreshes a user as an online member of a topic on a node.
-- KEYS[1] topic members zset (uid -> deadline ms, Redis clock), KEYS[2] the node's members zset,
-- KEYS[3] topic nodes zset (node -> deadline); all three share the {topic} hash tag.
-- ARGV[1] uid, ARGV[2] node, ARGV[3] ttl ms
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local ttl = tonumber(ARGV[3])
for i = 1, 3 do
  redis.call('ZREMRANGEBYSCORE', KEYS[i], '-inf', now)
end
redis.call('ZADD', KEYS[1], now + ttl, ARGV[1])
redis.call('ZADD', KEYS[2], now + ttl, ARGV[1])
redis.call('ZADD', KEYS[3], now + ttl, ARGV[2])
for i = 1, 3 do
  redis.call('PEXPIRE', KEYS[i], ttl)
end
return 1
