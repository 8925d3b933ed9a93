-- KEYS[1] active code hash, KEYS[2] creation counter
-- ARGV: now_ms, code_id, code_mac, ttl_ms, resend_ms, per_hour
local now = tonumber(ARGV[1])
local resend = redis.call('HGET', KEYS[1], 'resend_at')
if resend and tonumber(resend) > now then
  return {'resend_too_soon', tostring(tonumber(resend) - now), ''}
end
local n = redis.call('INCR', KEYS[2])
if n == 1 then
  redis.call('EXPIRE', KEYS[2], 3600)
end
if n > tonumber(ARGV[6]) then
  return {'too_many', tostring(redis.call('PTTL', KEYS[2])), ''}
end
local old = redis.call('HGET', KEYS[1], 'id') or ''
redis.call('DEL', KEYS[1])
redis.call('HSET', KEYS[1], 'id', ARGV[2], 'code', ARGV[3], 'attempts', 0, 'verified', 0,
  'resend_at', now + tonumber(ARGV[5]), 'expires_at', now + tonumber(ARGV[4]))
redis.call('PEXPIRE', KEYS[1], ARGV[4])
return {'ok', '0', old}
