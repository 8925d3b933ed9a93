-- Keep a topic's watermark: the highest seq W such that every seq up to W is in place (a message
-- or a seq-skip marker). The seqs in place above a base are kept as a bitmap, so seqs that arrive
-- out of order are remembered until the seqs below them arrive.
-- KEYS[1] proj_wm hash: w = the watermark (absent: not known here), b = the seq of bit 0 of the
--         bitmap (seqs below b are all in place); b - 1 is a multiple of 8
-- KEYS[2] proj_seen bitmap: bit i is set when seq b + i is in place
-- ARGV[1] a seq now in place (0: none), ARGV[2] ttl ms of both keys,
-- ARGV[3] a watermark known elsewhere (the MySQL read model), or -1
-- Returns the watermark, -1 when it is not known.
local s = tonumber(ARGV[1])
local ttl = tonumber(ARGV[2])
local known = tonumber(ARGV[3])
local w = tonumber(redis.call('HGET', KEYS[1], 'w') or '-1')
local b = tonumber(redis.call('HGET', KEYS[1], 'b') or '1')
if w >= b and redis.call('EXISTS', KEYS[2]) == 0 then
  -- The bitmap behind w is gone (evicted): forget w rather than extend it wrongly.
  w = -1
end
if s >= b and s - b < 4294967296 then
  redis.call('SETBIT', KEYS[2], s - b, 1)
end
if w < 0 and s == 1 and b == 1 then
  w = 0 -- the first seq of a topic: nothing below it
end
if known > w then
  w = known
end
if w >= 0 then
  -- Every seq below x = w + 1 is in place: move the base up to x (aligned to whole bytes of the
  -- bitmap), set the bits of the few seqs between the new base and x, then extend w over the
  -- bits set after it.
  local x = w + 1
  if x > b then
    local drop = math.floor((x - b) / 8)
    if drop > 0 then
      local rest = redis.call('GETRANGE', KEYS[2], drop, -1)
      redis.call('SET', KEYS[2], rest)
      b = b + 8 * drop
    end
    for q = b, x - 1 do
      redis.call('SETBIT', KEYS[2], q - b, 1)
    end
  end
  local start = x - b
  local len = redis.call('STRLEN', KEYS[2])
  local pos = -1
  if math.floor(start / 8) < len then
    pos = redis.call('BITPOS', KEYS[2], 0, math.floor(start / 8))
  end
  if pos < 0 then
    pos = math.max(start, len * 8)
  end
  w = math.max(w, b + pos - 1)
  redis.call('HSET', KEYS[1], 'w', w, 'b', b)
else
  redis.call('HDEL', KEYS[1], 'w')
  redis.call('HSET', KEYS[1], 'b', b)
end
redis.call('PEXPIRE', KEYS[1], ttl)
if redis.call('EXISTS', KEYS[2]) == 1 then
  redis.call('PEXPIRE', KEYS[2], ttl)
end
return w
