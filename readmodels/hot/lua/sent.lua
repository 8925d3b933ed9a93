-- Apply a sent event.
-- KEYS[1] hot_msg:<seq> hash, KEYS[2] hot_msg_seqs zset, KEYS[3] proj_last_seq
-- ARGV[1] seq, ARGV[2] snapshot JSON, ARGV[3] content JSON, ARGV[4] updated_at,
-- ARGV[5] snapshot ttl ms (0: do not cache the snapshot), ARGV[6] state ttl ms, ARGV[7] max seqs per topic
-- The snapshot fields are only ever filled in, never overwritten: a recall ('r') or a newer edit
-- ('v') already applied wins over a redelivered sent event.
local seq = tonumber(ARGV[1])
local ttl = tonumber(ARGV[5])
if ttl > 0 then
  local existed = redis.call('EXISTS', KEYS[1]) == 1
  redis.call('HSETNX', KEYS[1], 'm', ARGV[2])
  if redis.call('HEXISTS', KEYS[1], 'r') == 1 then
    -- a tombstone left by an earlier recall: version 1 as sent, bumped by the recall
    redis.call('HSETNX', KEYS[1], 'v', '2')
  elseif redis.call('HEXISTS', KEYS[1], 'v') == 0 then
    redis.call('HSET', KEYS[1], 'c', ARGV[3], 'v', '1', 'u', ARGV[4])
  end
  if not existed then
    redis.call('PEXPIRE', KEYS[1], ttl)
  end
  redis.call('ZADD', KEYS[2], seq, ARGV[1])
  local n = redis.call('ZCARD', KEYS[2])
  local cap = tonumber(ARGV[7])
  if n > cap then
    redis.call('ZREMRANGEBYRANK', KEYS[2], 0, n - cap - 1)
  end
  if redis.call('PTTL', KEYS[2]) < ttl then
    redis.call('PEXPIRE', KEYS[2], ttl)
  end
end
local cur = tonumber(redis.call('GET', KEYS[3]) or '0')
if seq > cur then
  redis.call('SET', KEYS[3], ARGV[1], 'PX', ARGV[6])
else
  redis.call('PEXPIRE', KEYS[3], ARGV[6])
end
return 1
