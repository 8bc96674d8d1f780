#!lua flags=allow-oom
--[[
  delete_thread: remove every key of one thread: checkpoints, writes, blobs, indexes, the
  thread's own ttl setting, and its entries in the global metadata indexes.

  KEYS[1]  P:th:{T}         thread index (SET of namespaces)
  KEYS[2]  P:runs:{T}       run ids of the thread

  ARGV[1]  prefix P   ARGV[2]  hash tag {T}

  Reply: the number of checkpoints removed
]]
-- @include keyschema

local K = keyspace(ARGV[1], ARGV[2])
local removed = 0
for _, ns in ipairs(redis.call("SMEMBERS", KEYS[1])) do
  local refs = {}
  for _, id in ipairs(redis.call("ZRANGE", K.index(ns), 0, -1)) do
    local cp = K.checkpoint(ns, id)
    local fields = redis.call("HMGET", cp, "bv", "ix")
    for _, ref in ipairs(split_refs(fields[1])) do refs[ref] = true end
    unindex_checkpoint(K, ns, id, fields[2])
    redis.call("UNLINK", cp)
    removed = removed + 1
  end
  for _, id in ipairs(redis.call("SMEMBERS", K.writes_index(ns))) do
    redis.call("UNLINK", K.writes(ns, id))
  end
  for ref in pairs(refs) do redis.call("UNLINK", K.blob(ns, ref)) end
  redis.call("UNLINK", K.index(ns), K.writes_index(ns))
end
for _, run in ipairs(redis.call("SMEMBERS", KEYS[2])) do
  redis.call("UNLINK", K.run(run))
end
redis.call("UNLINK", KEYS[1], KEYS[2], K.ttl)
return removed
