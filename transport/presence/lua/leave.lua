-- Removes a user from a topic's online members on a node. The user stays in the topic's members
-- while another node still has them; the node leaves the topic's nodes with its last member.
-- KEYS[1] topic members zset, KEYS[2] the node's members zset, KEYS[3] topic nodes zset
-- ARGV[1] uid, ARGV[2] node, ARGV[3] per-node key prefix (the node's key is prefix .. node .. suffix),
-- ARGV[4] per-node key suffix
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZREM', KEYS[2], ARGV[1])
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
if redis.call('ZCARD', KEYS[2]) == 0 then
  redis.call('ZREM', KEYS[3], ARGV[2])
end
local elsewhere = false
for _, n in ipairs(redis.call('ZRANGE', KEYS[3], '(' .. now, '+inf', 'BYSCORE')) do
  if n ~= ARGV[2] then
    local s = redis.call('ZSCORE', ARGV[3] .. n .. ARGV[4], ARGV[1])
    if s and tonumber(s) > now then
      elsewhere = true
      break
    end
  end
end
if not elsewhere then
  redis.call('ZREM', KEYS[1], ARGV[1])
end
return elsewhere and 1 or 0
