-- Apply a run of sent events of one topic, then record their seqs in the topic's watermark
-- (watermark_lib.lua, which the loader puts in front of this file).
-- KEYS[1] hot_msg_seqs zset, KEYS[2] proj_last_seq, KEYS[3] proj_wm hash, KEYS[4] proj_seen bitmap,
-- KEYS[4 + i] hot_msg:<seq> hash of the i-th message
-- ARGV[1] state ttl ms, ARGV[2] max seqs per topic, then five per message: seq, snapshot JSON,
-- content JSON, updated_at, snapshot ttl ms (0: do not cache the snapshot)
-- The snapshot fields are only ever filled in, never overwritten: a recall ('r') or a newer edit
-- ('v') already applied wins over a redelivered sent event.
-- Returns the watermark.
local stateTTL = tonumber(ARGV[1])
local cap = tonumber(ARGV[2])
local n = (#ARGV - 2) / 5
local seqs = {}
local top, topArg, maxTTL = 0, '0', 0
for i = 1, n do
  local o = 2 + (i - 1) * 5
  local seq = tonumber(ARGV[o + 1])
  local ttl = tonumber(ARGV[o + 5])
  local key = KEYS[4 + i]
  if ttl > 0 then
    local existed = redis.call('EXISTS', key) == 1
    redis.call('HSETNX', key, 'm', ARGV[o + 2])
    if redis.call('HEXISTS', key, 'r') == 1 then
      -- a tombstone left by an earlier recall: version 1 as sent, bumped by the recall
      redis.call('HSETNX', key, 'v', '2')
    elseif redis.call('HEXISTS', key, 'v') == 0 then
      redis.call('HSET', key, 'c', ARGV[o + 3], 'v', '1', 'u', ARGV[o + 4])
    end
    if not existed then
      redis.call('PEXPIRE', key, ttl)
    end
    redis.call('ZADD', KEYS[1], seq, ARGV[o + 1])
    maxTTL = math.max(maxTTL, ttl)
  end
  seqs[i] = seq
  if seq > top then
    top, topArg = seq, ARGV[o + 1]
  end
end
if maxTTL > 0 then
  local count = redis.call('ZCARD', KEYS[1])
  if count > cap then
    redis.call('ZREMRANGEBYRANK', KEYS[1], 0, count - cap - 1)
  end
  if redis.call('PTTL', KEYS[1]) < maxTTL then
    redis.call('PEXPIRE', KEYS[1], maxTTL)
  end
end
local cur = tonumber(redis.call('GET', KEYS[2]) or '0')
if top > cur then
  redis.call('SET', KEYS[2], topArg, 'PX', stateTTL)
else
  redis.call('PEXPIRE', KEYS[2], stateTTL)
end
return watermark(KEYS[3], KEYS[4], seqs, stateTTL, -1)
