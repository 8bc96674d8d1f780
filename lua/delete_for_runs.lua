--[[
  delete_for_runs: remove, within one thread, every checkpoint written by the given runs,
  with its writes, its index entries and the blobs no remaining checkpoint references.

  KEYS[1]  P:th:{T}         thread index (SET of namespaces)
  KEYS[2]  P:runs:{T}       run ids of the thread

  ARGV[1]  prefix P   ARGV[2]  hash tag {T}   ARGV[3..]  run ids (encoded)

  Reply: the number of checkpoints removed
]]
-- @include keyschema
-- @include drop

local K = keyspace(ARGV[1], ARGV[2])
local refs_by_ns = {}
local removed = 0
for i = 3, #ARGV do
  local run = ARGV[i]
  if redis.call("SISMEMBER", KEYS[2], run) == 1 then
    for _, member in ipairs(redis.call("SMEMBERS", K.run(run))) do
      local sep = string.find(member, ":", 1, true)
      local ns, id = string.sub(member, 1, sep - 1), string.sub(member, sep + 1)
      refs_by_ns[ns] = refs_by_ns[ns] or {}
      drop_checkpoint(K, ns, id, refs_by_ns[ns])
      removed = removed + 1
    end
    redis.call("UNLINK", K.run(run))
    redis.call("SREM", KEYS[2], run)
  end
end
for ns, refs in pairs(refs_by_ns) do
  gc_blobs(K, ns, refs)
  forget_empty_namespace(K, ns)
end
return removed
