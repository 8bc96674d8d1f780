#!lua flags=allow-cross-slot-keys,no-writes
--[[
  thread_states: on a cluster, what the P:tb of many threads of one node hold of a list S, in
  one call: a reader's probe (lists.probe) asks each candidate thread its incarnation and
  newest score with S; a pipeline of thread_lists.lua calls, one per thread, cost the client
  more than the server's work (30 us a thread in redis-py's async cluster client).

  KEYS     none. The threads' keys are in ARGV: they live in many slots, all served by the
           node the client sends the call to (so the script is flagged
           allow-cross-slot-keys; a server refuses declared keys of several slots). A key of a
           slot this node does not serve, or one moving away, fails the whole call ("non local
           key"), having read nothing that counts: the client then asks those threads one call
           each (thread_lists.lua, which declares its slot and waits out a move).

  ARGV[1]   a list S
  ARGV[2..] P:tb:{T} of each thread asked

  Counts: KEYS 0; ARGV 1..
  Built by: core/calls.py thread_states()
  Reply: { { inc | false, newest | false }, ... }, one per key, in order: what thread_lists.lua
  replies to S for that thread.
]]
-- requires:

local out = {}
local fields = { "", "@" .. ARGV[1] }
for j = 2, #ARGV do
  out[j - 1] = redis.call("HMGET", ARGV[j], fields[1], fields[2])
end
return out
