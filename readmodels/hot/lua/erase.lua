-- Erase the content of one snapshot if its sender is the erased user (user.erased.v1).
-- KEYS[1] hot_msg:<seq> hash
-- ARGV[1] the snapshot's "from" as it is written in its meta JSON ('"from":"<uid>"'),
-- ARGV[2] the erased-content marker
-- Returns 1 when the content was replaced.
local m = redis.call('HGET', KEYS[1], 'm')
if not m or not string.find(m, ARGV[1], 1, true) then
  return 0
end
if redis.call('HEXISTS', KEYS[1], 'c') == 0 then
  return 0
end
redis.call('HSET', KEYS[1], 'c', ARGV[2])
return 1
