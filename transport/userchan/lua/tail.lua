-- Reads the last items of a user's channel log, oldest first.
-- KEYS[1] log zset (seq -> item); ARGV[1] how many
local n = tonumber(ARGV[1])
return redis.call('ZRANGE', KEYS[1], -n, -1)
