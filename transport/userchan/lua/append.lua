-- Appends items to a user's channel log and lists the nodes with a channel session of the user.
-- KEYS[1] meta hash (epoch, seq), KEYS[2] log zset (seq -> item), KEYS[3] the user's channel
-- nodes zset (node -> deadline ms, Redis clock); all share the user's hash tag.
-- ARGV[1] the epoch of a new log, ARGV[2] the most items kept, ARGV[3] ttl ms,
-- ARGV[4..] the items: JSON objects without their opening brace; each is stored with its seq
-- and the log's epoch as its first members.
-- Returns {epoch, seq of the first item appended, node...}.
local epoch = redis.call('HGET', KEYS[1], 'epoch')
if not epoch then
  epoch = ARGV[1]
  redis.call('DEL', KEYS[2])
  redis.call('HSET', KEYS[1], 'epoch', epoch, 'seq', 0)
end
local first = 0
for i = 4, #ARGV do
  local seq = redis.call('HINCRBY', KEYS[1], 'seq', 1)
  if first == 0 then
    first = seq
  end
  redis.call('ZADD', KEYS[2], seq, '{"seq":"' .. seq .. '","epoch":"' .. epoch .. '",' .. ARGV[i])
end
local keep = tonumber(ARGV[2])
local n = redis.call('ZCARD', KEYS[2])
if n > keep then
  redis.call('ZREMRANGEBYRANK', KEYS[2], 0, n - keep - 1)
end
local ttl = tonumber(ARGV[3])
redis.call('PEXPIRE', KEYS[1], ttl)
redis.call('PEXPIRE', KEYS[2], ttl)
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local out = {epoch, first}
for _, node in ipairs(redis.call('ZRANGE', KEYS[3], '(' .. now, '+inf', 'BYSCORE')) do
  out[#out + 1] = node
end
return out
