-- Reads a user's channel log after a seq.
-- KEYS[1] meta hash (epoch, seq), KEYS[2] log zset (seq -> item)
-- ARGV[1] after seq, ARGV[2] the most items returned (0: none, only the head)
-- Returns {epoch or false, last seq, first seq kept (0 when none), item...}.
local h = redis.call('HMGET', KEYS[1], 'epoch', 'seq')
if not h[1] then
  return {false, 0, 0}
end
local first = 0
local f = redis.call('ZRANGE', KEYS[2], 0, 0, 'WITHSCORES')
if #f == 2 then
  first = tonumber(f[2])
end
local out = {h[1], tonumber(h[2]), first}
local limit = tonumber(ARGV[2])
if limit > 0 then
  for _, item in ipairs(redis.call('ZRANGE', KEYS[2], '(' .. ARGV[1], '+inf', 'BYSCORE', 'LIMIT', 0, limit)) do
    out[#out + 1] = item
  end
end
return out
