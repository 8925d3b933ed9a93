-- Fill a cache entry read from MySQL, unless it was invalidated since the reader looked.
-- KEYS[1] the entry, KEYS[2] its fence.
-- ARGV[1] the fence value the reader saw before it read MySQL ('' for none), ARGV[2] ttl ms,
-- ARGV[3] 'set', 'zset' or 'hash', ARGV[4..] members, score/member pairs or field/value pairs.
-- Returns 1 when filled, 0 when the fence moved or the entry exists already.
local fence = redis.call('GET', KEYS[2]) or ''
if fence ~= ARGV[1] then
  return 0
end
if redis.call('EXISTS', KEYS[1]) == 1 then
  return 0
end
local cmd = 'HSET'
if ARGV[3] == 'set' then
  cmd = 'SADD'
elseif ARGV[3] == 'zset' then
  cmd = 'ZADD'
end
-- unpack is limited by the Lua stack: add in chunks (even, so pairs stay whole).
local n = #ARGV
local i = 4
while i <= n do
  local j = math.min(i + 999, n)
  redis.call(cmd, KEYS[1], unpack(ARGV, i, j))
  i = j + 1
end
if n >= 4 then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 1
