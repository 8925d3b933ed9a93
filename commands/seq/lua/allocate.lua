-- Claims a send's idempotency key and allocates the next seq of its topic, atomically.
-- KEYS[1] claim key  (<prefix><tenant>:topic:{<topic>}:uniq:msg:<from>:<client_msg_id>)
-- KEYS[2] counter    (<prefix><tenant>:topic:{<topic>}:last_seq)
-- ARGV[1] the pending claim value (JSON), ARGV[2] the pending TTL in milliseconds.
-- Returns {0, seq}   the claim was taken and seq allocated;
--         {1, value} the claim is held (pending or done): its stored value, nothing written;
--         {2, ''}    the counter is missing: nothing written, seed it from the store and retry.
-- A failed (or unreadable) claim may be taken again.
local cur = redis.call('GET', KEYS[1])
if cur then
  local ok, v = pcall(cjson.decode, cur)
  if ok and type(v) == 'table' and v['status'] ~= 'failed' then
    return {1, cur}
  end
end
if redis.call('EXISTS', KEYS[2]) == 0 then
  return {2, ''}
end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return {0, redis.call('INCR', KEYS[2])}
