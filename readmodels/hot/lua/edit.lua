-- Apply an edit: replace the content only if the edit is newer and the message is not recalled.
-- KEYS[1] hot_msg:<seq> hash
-- ARGV[1] edit version, ARGV[2] content JSON, ARGV[3] updated_at, ARGV[4] ttl ms for a partial
-- snapshot when none exists yet (0: create none)
if redis.call('HEXISTS', KEYS[1], 'r') == 1 then
  return 0
end
local v = tonumber(redis.call('HGET', KEYS[1], 'v') or '0')
if tonumber(ARGV[1]) <= v then
  return 0
end
local existed = redis.call('EXISTS', KEYS[1]) == 1
if not existed and tonumber(ARGV[4]) <= 0 then
  return 0
end
redis.call('HSET', KEYS[1], 'c', ARGV[2], 'v', ARGV[1], 'u', ARGV[3])
if not existed then
  redis.call('PEXPIRE', KEYS[1], ARGV[4])
end
return 1
