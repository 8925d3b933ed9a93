-- Apply a seq-skip marker: the seq is a final hole. For a cached topic the marker is indexed like
-- a message, so a cached page can show the seq is final; it holds no message.
-- KEYS[1] hot_msg:<seq> hash, KEYS[2] hot_msg_seqs zset, KEYS[3] proj_last_seq
-- ARGV[1] seq, ARGV[2] snapshot ttl ms (0: do not cache), ARGV[3] state ttl ms, ARGV[4] max seqs per topic,
-- ARGV[5] the time the seq was given up
local seq = tonumber(ARGV[1])
local ttl = tonumber(ARGV[2])
if ttl > 0 and redis.call('HEXISTS', KEYS[1], 'm') == 0 then
  redis.call('HSET', KEYS[1], 's', '1', 'u', ARGV[5])
  redis.call('PEXPIRE', KEYS[1], ttl)
  redis.call('ZADD', KEYS[2], seq, ARGV[1])
  local n = redis.call('ZCARD', KEYS[2])
  local cap = tonumber(ARGV[4])
  if n > cap then
    redis.call('ZREMRANGEBYRANK', KEYS[2], 0, n - cap - 1)
  end
  if redis.call('PTTL', KEYS[2]) < ttl then
    redis.call('PEXPIRE', KEYS[2], ttl)
  end
end
local cur = tonumber(redis.call('GET', KEYS[3]) or '0')
if seq > cur then
  redis.call('SET', KEYS[3], ARGV[1], 'PX', ARGV[3])
else
  redis.call('PEXPIRE', KEYS[3], ARGV[3])
end
return 1
