-- Claims a send's idempotency key and allocates the next seq of its topic, atomically.
-- KEYS[1] claim key  (<prefix><tenant>:topic:{<topic>}:uniq:msg:<from>:<client_msg_id>)
-- KEYS[2] counter    (<prefix><tenant>:topic:{<topic>}:last_seq)
-- ARGV[1] the pending claim value (JSON) without its closing brace: the seq is appended to it;
-- ARGV[2] the pending TTL in milliseconds;
-- ARGV[3] the nonce of an abandoned attempt whose pending claim may be taken over, or ''.
-- Returns {0, seq}   the claim was taken and seq allocated;
--         {1, value} the claim is held (pending or done): its stored value, nothing written;
--         {2, ''}    the counter is missing: nothing written, seed it from the store and retry.
-- A failed (or unreadable) claim may be taken again; a pending one only by the take-over nonce.
local cur = redis.call('GET', KEYS[1])
if cur then
  local ok, v = pcall(cjson.decode, cur)
  if ok and type(v) == 'table' and v['status'] ~= 'failed' then
    local takeover = ARGV[3] ~= '' and v['status'] == 'pending' and v['nonce'] == ARGV[3]
    if not takeover then
      return {1, cur}
    end
  end
end
if redis.call('EXISTS', KEYS[2]) == 0 then
  return {2, ''}
end
local seq = redis.call('INCR', KEYS[2])
redis.call('SET', KEYS[1], ARGV[1] .. ',"seq":' .. string.format('%d', seq) .. '}', 'PX', ARGV[2])
return {0, seq}
