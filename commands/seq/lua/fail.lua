-- Marks a claim failed so the same client_msg_id may be sent again, unless it is already done or
-- held by another attempt (pending with another nonce: a retry took it over).
-- KEYS[1] claim key; ARGV[1] the failed value (JSON), ARGV[2] the failed TTL in milliseconds,
-- ARGV[3] the nonce of the attempt that failed ('' for none).
-- Returns 1 when marked, 0 when the claim was left alone.
local cur = redis.call('GET', KEYS[1])
if cur then
  local ok, v = pcall(cjson.decode, cur)
  if ok and type(v) == 'table' then
    if v['status'] == 'done' then
      return 0
    end
    if v['status'] == 'pending' and type(v['nonce']) == 'string' and v['nonce'] ~= ARGV[3] then
      return 0
    end
  end
end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return 1
