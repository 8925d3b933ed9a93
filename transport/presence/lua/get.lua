-- Reads a user's presence.
-- KEYS[1] user hash, KEYS[2] user sessions zset
-- Returns {live sessions, status, node, last_active_at, last_seen_at, now}; missing fields are false.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local live = redis.call('ZCOUNT', KEYS[2], '(' .. now, '+inf')
local h = redis.call('HMGET', KEYS[1], 'status', 'node', 'last_active_at', 'last_seen_at')
return {live, h[1], h[2], h[3], h[4], now}
