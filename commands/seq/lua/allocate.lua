-- Claims the idempotency keys of sends to one topic and allocates their seqs, atomically, in
-- order: as one call per send would.
-- KEYS[1] counter (<prefix><tenant>:topic:{<topic>}:last_seq)
-- KEYS[1 + i] the i-th send's claim key (<prefix><tenant>:topic:{<topic>}:uniq:msg:<from>:<client_msg_id>)
-- ARGV[1] the pending TTL in milliseconds; then two per send: the pending claim value (JSON)
-- without its closing brace (the seq is appended to it), and the nonce of an abandoned attempt
-- whose pending claim may be taken over, or ''.
-- Returns two values per send:
--   0, seq    the claim was taken and seq allocated;
--   1, value  the claim is held (pending or done): its stored value, nothing written;
--   2, ''     the counter is missing: nothing written, seed it from the store and retry.
-- A failed (or unreadable) claim may be taken again; a pending one only by the take-over nonce.
local out = {}
for i = 2, #KEYS do
  local claim = KEYS[i]
  local value, takeoverNonce = ARGV[2 * i - 2], ARGV[2 * i - 1]
  local held = nil
  local cur = redis.call('GET', claim)
  if cur then
    local ok, v = pcall(cjson.decode, cur)
    if ok and type(v) == 'table' and v['status'] ~= 'failed' then
      local takeover = takeoverNonce ~= '' and v['status'] == 'pending' and v['nonce'] == takeoverNonce
      if not takeover then
        held = cur
      end
    end
  end
  if held then
    out[#out + 1] = 1
    out[#out + 1] = held
  elseif redis.call('EXISTS', KEYS[1]) == 0 then
    out[#out + 1] = 2
    out[#out + 1] = ''
  else
    local seq = redis.call('INCR', KEYS[1])
    redis.call('SET', claim, value .. ',"seq":' .. string.format('%d', seq) .. '}', 'PX', ARGV[1])
    out[#out + 1] = 0
    out[#out + 1] = seq
  end
end
return out
