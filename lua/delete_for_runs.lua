#!lua flags=allow-oom
--[[
  delete_for_runs: remove, within one thread, every checkpoint written by the given runs,
  with its writes, its index entries and the blobs no remaining checkpoint references.

  KEYS[1]  P:th:{T}         thread index (SET of namespaces)
  KEYS[2]  P:runs:{T}       run ids of the thread

  ARGV[1]  prefix P   ARGV[2]  hash tag {T}   ARGV[3..]  run ids (encoded)

  Reply: the number of checkpoints removed

  Delta channels: a checkpoint that stays may rebuild a LangGraph DeltaChannel from writes
  and a seed stored at ancestors written by one of the runs (see include/delta.lua). Such
  ancestors are kept, so every checkpoint that stays rebuilds exactly the state it had: for
  every remaining checkpoint whose parent is to go, the ancestors its delta channels read
  (delta_dependencies) stay, and so, in turn, do the ancestors those read. A kept checkpoint
  keeps its run index entry, so the same call can remove it once nothing depends on it.
  Threads without delta channels lose every checkpoint of the runs.
]]
-- @include keyschema
-- @include drop
-- @include delta

local K = keyspace(ARGV[1], ARGV[2])

-- the checkpoints of the runs, by namespace: doomed[ns][id] = true
local doomed, runs = {}, {}
for i = 3, #ARGV do
  local run = ARGV[i]
  if redis.call("SISMEMBER", KEYS[2], run) == 1 then
    runs[#runs + 1] = run
    for _, member in ipairs(redis.call("SMEMBERS", K.run(run))) do
      local sep = string.find(member, ":", 1, true)
      local ns, id = string.sub(member, 1, sep - 1), string.sub(member, sep + 1)
      doomed[ns] = doomed[ns] or {}
      doomed[ns][id] = true
    end
  end
end

-- spare what remaining checkpoints rebuild their delta channels from: spared[ns][id] = true
local spared = {}
for ns, set in pairs(doomed) do
  spared[ns] = {}
  local queue = {}
  for _, id in ipairs(redis.call("ZRANGE", K.index(ns), 0, -1)) do
    if not set[id] then
      local parent = redis.call("HGET", K.checkpoint(ns, id), "p")
      if parent and set[parent] then queue[#queue + 1] = id end
    end
  end
  local head = 1
  while head <= #queue do
    for _, id in ipairs(delta_dependencies(K, ns, queue[head])) do
      if set[id] then
        set[id] = nil
        spared[ns][id] = true
        queue[#queue + 1] = id
      end
    end
    head = head + 1
  end
end

local removed = 0
for ns, set in pairs(doomed) do
  local refs = {}
  for id in pairs(set) do
    drop_checkpoint(K, ns, id, refs)
    removed = removed + 1
  end
  gc_blobs(K, ns, refs)
  forget_empty_namespace(K, ns)
end
for _, run in ipairs(runs) do
  local key = K.run(run)
  for _, member in ipairs(redis.call("SMEMBERS", key)) do
    local sep = string.find(member, ":", 1, true)
    local ns, id = string.sub(member, 1, sep - 1), string.sub(member, sep + 1)
    if not (spared[ns] and spared[ns][id]) then redis.call("SREM", key, member) end
  end
  if redis.call("SCARD", key) == 0 then redis.call("SREM", KEYS[2], run) end
end
return removed
