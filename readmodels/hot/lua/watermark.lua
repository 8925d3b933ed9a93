-- Record that a seq is in place and return the topic's watermark (watermark_lib.lua, which the
-- loader puts in front of this file).
-- KEYS[1] proj_wm hash, KEYS[2] proj_seen bitmap
-- ARGV[1] a seq now in place (0: none), ARGV[2] ttl ms of both keys,
-- ARGV[3] a watermark known elsewhere (the MySQL read model), or -1
local seqs = {}
if tonumber(ARGV[1]) > 0 then
  seqs[1] = tonumber(ARGV[1])
end
return watermark(KEYS[1], KEYS[2], seqs, tonumber(ARGV[2]), tonumber(ARGV[3]))
