#!lua flags=no-writes
--[[
  check_thread: report every broken link among one thread's keys (read only). Used by the
  invariant checker, which also compares the keys reachable from the indexes with the keys a
  SCAN finds, to report keys that no index leads to.

  KEYS[1]  P:th:{T}         thread index (SET of namespaces)
  KEYS[2]  P:runs:{T}       run ids of the thread

  ARGV[1]  prefix P   ARGV[2]  hash tag {T}

  Reply: { {problem, key, problem, key, ...}, {reachable key, ...} } where a problem is one of
    "namespace without index", "index entry without checkpoint",
    "checkpoint without blob", "writes index entry without writes",
    "run without run index", "run index entry without checkpoint",
    "checkpoint without its metadata index entry"
]]
-- @include keyschema

local K = keyspace(ARGV[1], ARGV[2])
local problems, reachable, seen = {}, {}, {}
local function report(problem, key)
  problems[#problems + 1] = problem
  problems[#problems + 1] = key
end
local function reach(key)
  if not seen[key] and redis.call("EXISTS", key) == 1 then
    seen[key] = true
    reachable[#reachable + 1] = key
    return true
  end
  return seen[key] == true
end

reach(KEYS[1])
reach(KEYS[2])
reach(K.ttl)
for _, ns in ipairs(redis.call("SMEMBERS", KEYS[1])) do
  local has_index, has_writes = reach(K.index(ns)), reach(K.writes_index(ns))
  if not has_index and not has_writes then report("namespace without index", K.index(ns)) end
  for _, id in ipairs(redis.call("ZRANGE", K.index(ns), 0, -1)) do
    local cp = K.checkpoint(ns, id)
    if reach(cp) then
      local fields = redis.call("HMGET", cp, "bv", "ix")
      for _, ref in ipairs(split_refs(fields[1])) do
        if not reach(K.blob(ns, ref)) then report("checkpoint without blob", K.blob(ns, ref)) end
      end
      for _, suffix in ipairs(split_refs(fields[2])) do
        if not redis.call("ZSCORE", K.metadata_index(suffix), K.member(ns, id)) then
          report("checkpoint without its metadata index entry", cp)
        end
      end
    else
      report("index entry without checkpoint", cp)
    end
  end
  for _, id in ipairs(redis.call("SMEMBERS", K.writes_index(ns))) do
    if not reach(K.writes(ns, id)) then report("writes index entry without writes", K.writes(ns, id)) end
  end
end
for _, run in ipairs(redis.call("SMEMBERS", KEYS[2])) do
  if reach(K.run(run)) then
    for _, member in ipairs(redis.call("SMEMBERS", K.run(run))) do
      local sep = string.find(member, ":", 1, true)
      local cp = K.checkpoint(string.sub(member, 1, sep - 1), string.sub(member, sep + 1))
      if redis.call("EXISTS", cp) == 0 then report("run index entry without checkpoint", cp) end
    end
  else
    report("run without run index", K.run(run))
  end
end
return { problems, reachable }
