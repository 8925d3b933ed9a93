-- KEYS[1] active code hash
-- ARGV: code_mac, max_attempts, consume (1) or verify (0)
-- Returns {outcome, code_id, attempts}. One script, so two concurrent checks of one code never
-- both succeed.
local h = redis.call('HMGET', KEYS[1], 'id', 'code', 'attempts', 'verified')
if not h[1] then
  return {'no_code', '', '0'}
end
if h[2] ~= ARGV[1] then
  local a = redis.call('HINCRBY', KEYS[1], 'attempts', 1)
  if a >= tonumber(ARGV[2]) then
    redis.call('DEL', KEYS[1])
    return {'locked', h[1], tostring(a)}
  end
  return {'wrong', h[1], tostring(a)}
end
if ARGV[3] == '1' then
  redis.call('DEL', KEYS[1])
  return {'consumed', h[1], h[3]}
end
if h[4] == '1' then
  return {'used', h[1], h[3]}
end
redis.call('HSET', KEYS[1], 'verified', 1)
return {'verified', h[1], h[3]}
