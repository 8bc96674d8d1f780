#!lua flags=no-writes
--[[
  export_thread: every record of one thread, flat, in the form import_thread.lua takes as
  ARGV. copy_thread is this script on the source thread followed by import_thread on the
  target: the two threads live in different cluster slots, so one script cannot hold both.

  KEYS[1]  P:th:{T}         thread index (SET of namespaces)

  ARGV[1]  prefix P   ARGV[2]  hash tag {T}

  Reply: a flat list of records, each one of
    "c", ns, id, n, then n field/value pairs of the checkpoint hash
    "w", ns, id, n, then n field/value pairs of its writes hash
    "b", ns, ref, value
]]
-- @include keyschema

local K = keyspace(ARGV[1], ARGV[2])
local out = {}
local function push_hash(kind, ns, id, key)
  local flat = redis.call("HGETALL", key)
  if #flat == 0 then return end
  out[#out + 1] = kind
  out[#out + 1] = ns
  out[#out + 1] = id
  out[#out + 1] = #flat / 2
  for _, v in ipairs(flat) do out[#out + 1] = v end
end
for _, ns in ipairs(redis.call("SMEMBERS", KEYS[1])) do
  local refs = {}
  for _, id in ipairs(redis.call("ZRANGE", K.index(ns), 0, -1)) do
    local cp = K.checkpoint(ns, id)
    for _, ref in ipairs(split_refs(redis.call("HGET", cp, "bv"))) do refs[ref] = true end
    push_hash("c", ns, id, cp)
  end
  for _, id in ipairs(redis.call("SMEMBERS", K.writes_index(ns))) do
    push_hash("w", ns, id, K.writes(ns, id))
  end
  for ref in pairs(refs) do
    local value = redis.call("GET", K.blob(ns, ref))
    if value then
      out[#out + 1] = "b"
      out[#out + 1] = ns
      out[#out + 1] = ref
      out[#out + 1] = value
    end
  end
end
return out
