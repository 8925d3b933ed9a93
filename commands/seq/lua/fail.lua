-- Marks a claim failed so the same client_msg_id may be sent again, unless it is already done.
-- KEYS[1] claim key; ARGV[1] the failed value (JSON), ARGV[2] the failed TTL in milliseconds.
-- Returns 1 when marked, 0 when the claim was done and left alone.
local cur = redis.call('GET', KEYS[1])
if cur then
  local ok, v = pcall(cjson.decode, cur)
  if ok and type(v) == 'table' and v['status'] == 'done' then
    return 0
  end
end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return 1
