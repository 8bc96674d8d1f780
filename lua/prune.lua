#!lua flags=allow-oom
--[[
  prune: keep only the latest checkpoint of every namespace of one thread (strategy
  keep_latest; strategy delete_all is delete_thread.lua), together with the ancestors its
  delta channels are rebuilt from. The kept checkpoints keep their pending writes and every
  blob they reference; everything else of the thread goes: older checkpoints, their writes,
  writes stored for checkpoints that are gone, and blobs no kept checkpoint references.

  KEYS[1]  P:th:{T}         thread root (SET of namespaces)
  KEYS[2]  P:runs:{T}       run ids of the thread
  KEYS[3]  P:gc:{T}         gc root

  ARGV[1]  prefix P   ARGV[2]  hash tag {T}   ARGV[3]  budget of this call (see reap_thread)

  Counts: KEYS 3; ARGV 3
  Built by: core/calls.py prune()
  Reply: the number of jobs still pending (0: done)

  In steps (include/reap_prune.lua): per namespace, one step swaps in fresh indexes that
  hold only what stays, so readers see the namespace pruned at once; the old indexes are then
  reaped in bounded steps. A thread whose namespaces fit in one step is pruned atomically.

  Delta channels: a LangGraph DeltaChannel stores its value only every snapshot_frequency
  updates; at the other checkpoints it stores nothing, and its value is rebuilt from the
  nearest ancestor that stores one (the seed) plus the writes of the ancestors in between.
  So the latest checkpoint alone would come back with those channels empty. prune keeps the
  latest checkpoint's parent chain back to the farthest ancestor that rebuilding reads: the
  seed of every delta channel the latest checkpoint does not store, or, for a channel with no
  seed, the oldest ancestor holding a write to it (see delta_dependencies in
  include/delta.lua; the channels come from the checkpoint's metadata field
  counters_since_delta_snapshot, which LangGraph writes). Nothing else is kept: the state
  rebuilt at the latest checkpoint is exactly the one before pruning, and a thread without
  delta channels keeps only its latest checkpoint.
]]
-- requires: keyschema, jobs, reap

local prefix, tag = ARGV[1], ARGV[2]
if redis.call("EXISTS", KEYS[1]) == 1 then
  local G = jobspace(prefix, tag, new_job(KEYS[3], "prune"))
  redis.call("SUNIONSTORE", G.part("todo"), KEYS[1])
end
return reap(prefix, tag, tonumber(ARGV[3]))
