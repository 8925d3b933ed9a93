-- watermark(wk, sk, seqs, ttl, known): keep a topic's watermark, the highest seq W such that
-- every seq up to W is in place (a message or a seq-skip marker). The seqs in place above a base
-- are kept as a bitmap, so seqs that arrive out of order are remembered until the seqs below
-- them arrive.
-- wk: proj_wm hash: w = the watermark (absent: not known here), b = the seq of bit 0 of the
--     bitmap (seqs below b are all in place); b - 1 is a multiple of 8
-- sk: proj_seen bitmap: bit i is set when seq b + i is in place
-- seqs: the seqs now in place (may be empty); ttl: ttl ms of both keys;
-- known: a watermark known elsewhere (the MySQL read model), or -1
-- Returns the watermark, -1 when it is not known.
local function watermark(wk, sk, seqs, ttl, known)
  local w = tonumber(redis.call('HGET', wk, 'w') or '-1')
  local b = tonumber(redis.call('HGET', wk, 'b') or '1')
  if w >= b and redis.call('EXISTS', sk) == 0 then
    -- The bitmap behind w is gone (evicted): forget w rather than extend it wrongly.
    w = -1
  end
  for _, s in ipairs(seqs) do
    if s >= b and s - b < 4294967296 then
      redis.call('SETBIT', sk, s - b, 1)
    end
    if w < 0 and s == 1 and b == 1 then
      w = 0 -- the first seq of a topic: nothing below it
    end
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
        local rest = redis.call('GETRANGE', sk, drop, -1)
        redis.call('SET', sk, rest)
        b = b + 8 * drop
      end
      for q = b, x - 1 do
        redis.call('SETBIT', sk, q - b, 1)
      end
    end
    local start = x - b
    local len = redis.call('STRLEN', sk)
    local pos = -1
    if math.floor(start / 8) < len then
      pos = redis.call('BITPOS', sk, 0, math.floor(start / 8))
    end
    if pos < 0 then
      pos = math.max(start, len * 8)
    end
    w = math.max(w, b + pos - 1)
    redis.call('HSET', wk, 'w', w, 'b', b)
  else
    redis.call('HDEL', wk, 'w')
    redis.call('HSET', wk, 'b', b)
  end
  redis.call('PEXPIRE', wk, ttl)
  if redis.call('EXISTS', sk) == 1 then
    redis.call('PEXPIRE', sk, ttl)
  end
  return w
end
