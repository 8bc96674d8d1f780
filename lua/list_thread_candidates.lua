#!lua flags=no-writes
--[[
  list_thread_candidates: a chunk of the threads that may have checkpoints with every one of
  some metadata values, newest first, from the threads-by-value indexes (standalone servers
  only), for list(None, filter) on keys without a metadata index of their own. A thread's
  score in an index is at least id_score() of each of its checkpoints with that value
  (include/keyschema.lua), so the client visits threads in score order and stops once the
  checkpoints it has are newer than the next thread's score. It lists each thread with the
  whole filter: a thread listed here that no longer matches (its checkpoints pruned, deleted
  or expired) costs it a call, not a wrong answer.

  KEYS[1..n]  P:tm:<key>:<value>  threads-by-value indexes (ZSET of thread tags), one per value

  ARGV[1]  prefix P
  ARGV[2]  the highest score to read ("inf" for the first chunk), inclusive
  ARGV[3]  how many members at that score to skip (the previous chunk read them)
  ARGV[4]  how many members of the smallest index to read

  Reply: "BUILDING" when the indexes are not known to hold every thread (the store had
  checkpoints when they were registered, and no reindex has completed them since): the client
  visits every thread instead. Else { last score read | false, members read at that score,
  members read, tag, score, tag, score, ... }: of the members read from the smallest index,
  those in every other index too, each with the least of its scores.
]]

if redis.call("HGET", ARGV[1] .. ":mk", "\0threads") ~= "ready" then return "BUILDING" end
local driver, smallest = 1, nil
for j = 1, #KEYS do
  local size = redis.call("ZCARD", KEYS[j])
  if not smallest or size < smallest then driver, smallest = j, size end
end
local read = redis.call("ZREVRANGEBYSCORE", KEYS[driver], ARGV[2], "-inf", "WITHSCORES",
  "LIMIT", ARGV[3], ARGV[4])
if #read == 0 then return { false, 0, 0 } end
local last = read[#read]
local out = { last, 0, #read / 2 }
for j = 1, #read, 2 do
  local tag, score = read[j], read[j + 1]
  if score == last then out[2] = out[2] + 1 end
  for k = 1, #KEYS do
    if k ~= driver and score then
      local other = redis.call("ZSCORE", KEYS[k], tag)
      if not other then
        score = nil
      elseif tonumber(other) < tonumber(score) then
        score = other
      end
    end
  end
  if score then
    out[#out + 1] = tag
    out[#out + 1] = score
  end
end
return out
