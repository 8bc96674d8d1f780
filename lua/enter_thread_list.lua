#!lua
--[[
  enter_thread_list: on a cluster, enter a thread in a threads-by-value list ahead of the
  checkpoints that need it (include/lists.lua).

  KEYS[1]  P:tm:S           the list (ZSET of "{T}<inc>" members)

  ARGV[1]  the member "{T}<inc>"
  ARGV[2]  its score at least ("inf" or an integer; ZADD GT: a score only grows)

  Counts: KEYS 1; ARGV 2
  Built by: core/calls.py enter_thread_list()
  Reply: when the member is new, up to two other members chosen at random, which the client
  removes if their incarnation is gone (deleted, expired): the list stays bounded, as a
  standalone server's is by index_thread(). Else an empty list.

  The list never expires (the threads in it may live longer than any write-ahead says), and
  maxmemory refuses this call as it would the put that follows.
]]
-- requires:

if redis.call("ZADD", KEYS[1], "GT", ARGV[2], ARGV[1]) == 0 then return {} end  -- (not new)
local others = {}
for _, member in ipairs(redis.call("ZRANDMEMBER", KEYS[1], 3)) do
  if member ~= ARGV[1] and #others < 2 then others[#others + 1] = member end
end
return others
