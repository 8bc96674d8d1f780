#!lua
--[[
  thread_list_registry: on a cluster, the registry of the threads-by-value lists (P:tl), which
  lets writers find the lists nobody has written to for a while and sweep them: a list of a
  value no thread uses any more, or of threads that expired, would otherwise keep their
  entries for good, as it never expires (include/lists.lua).

  KEYS[1]  P:tl             the registry (ZSET: list suffix S -> the highest score written ahead
                            into the list)

  ARGV[1]  "enter", then a cutoff score, then pairs of (score, S): the lists a write-ahead
           wrote into (ZADD GT); reply up to 8 lists whose score is at most the cutoff, as
           { S, score, ... }, for the writer to sweep
  ARGV[1]  "swept", then the score to give a list still holding entries, then triples of
           (S, the score it was read with, the number of members left): a list left empty
           leaves the registry, one with members goes to the back, unless a write-ahead
           raised its score meanwhile; reply the number of lists changed
  ARGV[2..] what follows the mode, as above
  Counts: KEYS 1; ARGV 1..
  Built by: core/calls.py thread_list_registry()
]]
-- requires:

if ARGV[1] == "enter" then
  -- (score, S) pairs, 4,000 values at a time: unpack() fails beyond about 8,000, and a put
  -- may have a list for each of thousands of metadata values
  for first = 3, #ARGV, 4000 do
    redis.call("ZADD", KEYS[1], "GT", unpack(ARGV, first, math.min(first + 3999, #ARGV)))
  end
  return redis.call("ZRANGEBYSCORE", KEYS[1], "-inf", ARGV[2], "WITHSCORES", "LIMIT", 0, 8)
end
local changed = 0
for i = 3, #ARGV, 3 do
  local suffix, read, left = ARGV[i], ARGV[i + 1], tonumber(ARGV[i + 2])
  local score = redis.call("ZSCORE", KEYS[1], suffix)
  if score and score == read then
    if left == 0 then
      redis.call("ZREM", KEYS[1], suffix)
    else
      redis.call("ZADD", KEYS[1], "XX", ARGV[2], suffix)
    end
    changed = changed + 1
  end
end
return changed
