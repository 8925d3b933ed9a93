-- Lists the nodes with live online members of a topic.
-- KEYS[1] topic nodes zset (node -> deadline)
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
return redis.call('ZRANGE', KEYS[1], '(' .. now, '+inf', 'BYSCORE')
