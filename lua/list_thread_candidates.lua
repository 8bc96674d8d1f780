#!lua flags=no-writes
--[[
  list_thread_candidates: a chunk of the threads that may have checkpoints with every one of
  some metadata values, newest first, from the threads-by-value indexes (on a cluster: from one
  list at a time), for list(None, filter) on keys without a metadata index of their own. A thread's
  score in an index is at least id_score() of each of its checkpoints with that value
  (include/indexes.lua), so the client visits threads in score order and stops once the
  checkpoints it has are newer than the next thread's score. It lists each thread with the
  whole filter: a thread listed here that no longer matches (its checkpoints pruned, deleted
  or expired) costs it a call, not a wrong answer.

  KEYS[1..n]  P:tm:<key>:<value>  threads-by-value indexes (ZSET of thread tags), one per value

  ARGV[1]  prefix P
  ARGV[2]  the highest score to read: "inf" for the first chunk, then "(<score>" (exclusive)
  ARGV[3]  how many members to read at least (a chunk ends with every member of its last
           score, so that the next one starts below it whatever changes meanwhile)
  ARGV[4]  which index drives: 0 on the first call (the smallest is chosen), then the
           number the first reply gave
  ARGV[5]  "cluster": one list of a cluster (include/lists.lua; its members "{T}<inc>"),
           whose registry (another slot) the client has read

  Counts: KEYS 1..; ARGV 5
  Built by: core/calls.py list_thread_candidates()
  Reply: "BUILDING" when the indexes are not known to hold every thread (the store had
  checkpoints when they were registered, and no reindex has completed them since): the client
  visits every thread instead. Else { driver, last score read | false, tag, score, tag,
  score, ... }: the members read from the driving index that are in every other index too,
  each with its score in the driving index (every matching checkpoint has that value, so the
  score bounds them, and the scores come in order). false: the driving index has no more.
]]
-- requires: replies

if ARGV[5] ~= "cluster" and redis.call("HGET", ARGV[1] .. ":mk", "\0threads") ~= "ready" then
  return BUILDING
end
local driver = tonumber(ARGV[4])
if driver == 0 then
  local smallest
  for j = 1, #KEYS do
    local size = redis.call("ZCARD", KEYS[j])
    if not smallest or size < smallest then driver, smallest = j, size end
  end
end
local count = tonumber(ARGV[3])
local read = redis.call("ZREVRANGEBYSCORE", KEYS[driver], ARGV[2], "-inf", "WITHSCORES",
  "LIMIT", 0, count)
local last = false
if #read == 2 * count then
  -- a full chunk: its last score's members, all of them (ties may run past the chunk)
  last = read[#read]
  while #read > 0 and read[#read] == last do
    read[#read] = nil
    read[#read] = nil
  end
  for _, v in ipairs(redis.call("ZREVRANGEBYSCORE", KEYS[driver], last, last, "WITHSCORES")) do
    read[#read + 1] = v
  end
end
local out = { driver, last }
for j = 1, #read, 2 do
  local tag, in_all = read[j], true
  for k = 1, #KEYS do
    if k ~= driver and in_all and not redis.call("ZSCORE", KEYS[k], tag) then in_all = false end
  end
  if in_all then
    out[#out + 1] = tag
    out[#out + 1] = read[j + 1]
  end
end
return out
