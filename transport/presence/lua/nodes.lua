-- Lists the nodes with live entries in one or more zsets of nodes (node -> deadline), each node
-- once: a topic's online nodes, and the nodes with channel sessions its messages concern.
-- KEYS[1..n] zsets of one Redis Cluster slot
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
if #KEYS == 1 then
  return redis.call('ZRANGE', KEYS[1], '(' .. now, '+inf', 'BYSCORE')
end
local seen, out = {}, {}
for i = 1, #KEYS do
  for _, n in ipairs(redis.call('ZRANGE', KEYS[i], '(' .. now, '+inf', 'BYSCORE')) do
    if not seen[n] then
      seen[n] = true
      out[#out + 1] = n
    end
  end
end
return out
