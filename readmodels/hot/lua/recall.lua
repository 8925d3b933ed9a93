-- Apply a recall: drop the content for good and leave a recalled placeholder.
-- KEYS[1] hot_msg:<seq> hash
-- ARGV[1] recalled_at, ARGV[2] recalled_by, ARGV[3] ttl ms for a tombstone when no snapshot
-- exists yet (0: create none)
-- A tombstone keeps a sent event redelivered later from caching the recalled content.
if redis.call('HEXISTS', KEYS[1], 'r') == 1 then
  return 0
end
local existed = redis.call('EXISTS', KEYS[1]) == 1
if not existed and tonumber(ARGV[3]) <= 0 then
  return 0
end
redis.call('HDEL', KEYS[1], 'c')
redis.call('HSET', KEYS[1], 'r', '1', 'ra', ARGV[1], 'rb', ARGV[2], 'u', ARGV[1])
local v = redis.call('HGET', KEYS[1], 'v')
if v then
  redis.call('HSET', KEYS[1], 'v', tostring(tonumber(v) + 1))
end
if not existed then
  redis.call('PEXPIRE', KEYS[1], ARGV[3])
end
return 1
