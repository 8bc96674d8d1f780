#!lua flags=allow-oom
--[[
  prune: keep only the latest checkpoint of every namespace of one thread (strategy
  keep_latest; strategy delete_all is delete_thread.lua), together with the ancestors its
  delta channels are rebuilt from. The kept checkpoints keep their pending writes and every
  blob they reference; everything else of the thread goes.

  KEYS[1]  P:th:{T}         thread index (SET of namespaces)
  KEYS[2]  P:runs:{T}       run ids of the thread

  ARGV[1]  prefix P   ARGV[2]  hash tag {T}

  Reply: the number of checkpoints removed

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
-- @include keyschema
-- @include drop
-- @include delta

local K = keyspace(ARGV[1], ARGV[2])
local removed = 0
for _, ns in ipairs(redis.call("SMEMBERS", KEYS[1])) do
  local ids = redis.call("ZRANGE", K.index(ns), 0, -1)
  local keep = {}
  local latest = ids[#ids]
  if latest then
    keep[latest] = true
    for _, id in ipairs(delta_dependencies(K, ns, latest)) do keep[id] = true end
  end
  local refs = {}
  for _, id in ipairs(ids) do
    if not keep[id] then
      drop_checkpoint(K, ns, id, refs)
      removed = removed + 1
    end
  end
  -- writes stored against checkpoints that no longer (or never did) exist
  for _, id in ipairs(redis.call("SMEMBERS", K.writes_index(ns))) do
    if not keep[id] then
      redis.call("UNLINK", K.writes(ns, id))
      redis.call("SREM", K.writes_index(ns), id)
    end
  end
  gc_blobs(K, ns, refs)
  forget_empty_namespace(K, ns)
end
return removed
