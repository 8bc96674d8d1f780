#!lua flags=no-writes
--[[
  list_thread_candidates: the threads that may have checkpoints with every one of some
  metadata values, from the threads-by-value indexes (standalone servers only), for
  list(None, filter) on keys without a metadata index of their own. The client then lists
  those threads with the whole filter: a thread listed here that no longer matches (its
  checkpoints pruned, deleted or expired) costs it a call, not a wrong answer.

  KEYS[1..n]  P:tm:<key>:<value>  threads-by-value indexes (SET of thread tags), one per value

  ARGV[1]  prefix P

  Reply: "BUILDING" when the indexes are not known to hold every thread (the store had
  checkpoints when they were registered, and no reindex has completed them since): the client
  visits every thread instead. Else the tags of the threads listed in every one of the sets.
]]

if redis.call("HGET", ARGV[1] .. ":mk", "\0threads") ~= "ready" then return "BUILDING" end
if #KEYS == 1 then return redis.call("SMEMBERS", KEYS[1]) end
return redis.call("SINTER", unpack(KEYS))
