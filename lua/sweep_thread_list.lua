#!lua flags=allow-oom
--[[
  sweep_thread_list: on a cluster, read a threads-by-value list at random or remove entries of
  thread incarnations that are gone from it (include/lists.lua): an incarnation never comes
  back, so no writer can need them.

  KEYS[1]  P:tm:S           the list (ZSET of "{T}<inc>" members)

  ARGV[1]  "sample", then how many members: reply up to that many, chosen at random;
           "remove", then members "{T}<inc>": reply the number of members left;
           "score", then a member: reply its score (the invariant checker's)
  ARGV[2..] what the mode takes, as above: how many, the members, or the member

  Works on a server over its maxmemory: it only reads and frees.
  Counts: KEYS 1; ARGV 1..
  Built by: core/calls.py sweep_thread_list()
]]
-- requires:

if ARGV[1] == "sample" then return redis.call("ZRANDMEMBER", KEYS[1], tonumber(ARGV[2])) end
if ARGV[1] == "score" then return redis.call("ZSCORE", KEYS[1], ARGV[2]) end
redis.call("ZREM", KEYS[1], unpack(ARGV, 2))
return redis.call("ZCARD", KEYS[1])
