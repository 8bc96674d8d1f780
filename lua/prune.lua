--[[
  prune: keep only the latest checkpoint of every namespace of one thread (strategy
  keep_latest; strategy delete_all is delete_thread.lua). The kept checkpoints keep their
  pending writes and every blob they reference; everything else of the thread goes.

  KEYS[1]  P:th:{T}         thread index (SET of namespaces)
  KEYS[2]  P:runs:{T}       run ids of the thread

  ARGV[1]  prefix P   ARGV[2]  hash tag {T}

  Reply: the number of checkpoints removed
]]
-- @include keyschema
-- @include drop

local K = keyspace(ARGV[1], ARGV[2])
local removed = 0
for _, ns in ipairs(redis.call("SMEMBERS", KEYS[1])) do
  local ids = redis.call("ZRANGE", K.index(ns), 0, -1)
  local latest = ids[#ids]
  local refs = {}
  for i = 1, #ids - 1 do
    drop_checkpoint(K, ns, ids[i], refs)
    removed = removed + 1
  end
  -- writes stored against checkpoints that no longer (or never did) exist
  for _, id in ipairs(redis.call("SMEMBERS", K.writes_index(ns))) do
    if id ~= latest then
      redis.call("UNLINK", K.writes(ns, id))
      redis.call("SREM", K.writes_index(ns), id)
    end
  end
  gc_blobs(K, ns, refs)
  forget_empty_namespace(K, ns)
end
return removed
