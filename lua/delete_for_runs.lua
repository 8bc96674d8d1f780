#!lua flags=allow-oom
--[[
  delete_for_runs: remove, within one thread, every checkpoint written by the given runs,
  with its writes, its index entries and the blobs no remaining checkpoint references.

  KEYS[1]  P:th:{T}         thread root (SET of namespaces)
  KEYS[2]  P:runs:{T}       run ids of the thread
  KEYS[3]  P:gc:{T}         gc root

  ARGV[1]  prefix P   ARGV[2]  hash tag {T}   ARGV[3]  budget of this call (see reap_thread)
  ARGV[4..]  run ids (encoded)

  Reply: the number of jobs still pending (0: done)

  In steps (include/reap.lua, kind runs): the runs' checkpoints are collected, then every
  namespace they are in is walked once to find what must stay, then they are dropped, each
  with its keys in one step; a run whose checkpoints fit in one step goes atomically.

  Delta channels: a checkpoint that stays may rebuild a LangGraph DeltaChannel from writes
  and a seed stored at ancestors written by one of the runs (see include/delta.lua). Such
  ancestors are kept, so every checkpoint that stays rebuilds exactly the state it had: for
  every remaining checkpoint whose parent is to go, the ancestors its delta channels read
  (delta_dependencies) stay, and so, in turn, do the ancestors those read. A kept checkpoint
  keeps its run index entry, so the same call can remove it once nothing depends on it.
  Threads without delta channels lose every checkpoint of the runs.
]]
-- @include keyschema
-- @include record
-- @include drop
-- @include delta
-- @include reap

local prefix, tag = ARGV[1], ARGV[2]
local runs = {}
for i = 4, #ARGV do
  if redis.call("SISMEMBER", KEYS[2], ARGV[i]) == 1 then runs[#runs + 1] = ARGV[i] end
end
if #runs > 0 then
  local G = jobspace(prefix, tag, new_job(KEYS[3], "runs"))
  add_members(G.part("runs"), runs)
end
return reap(prefix, tag, tonumber(ARGV[3]))
