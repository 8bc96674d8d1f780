#!lua
--[[
  register_metadata_index: the registry of indexed metadata keys (on a cluster: only the
  threads-by-value lists' entry), which
  tells readers whether a global metadata index holds every checkpoint.

  KEYS[1]  P:mk             the registry (HASH: metadata key -> "ready" | "building")

  ARGV[1]  "?" to ask which of the keys are not registered yet (nothing written); "pending"
           to ask which registered keys are "building" (ARGV[2..] unused); "state" for the
           states of the keys (false: not registered);
           "ready" or "building" to register them in that state (a key already registered
           keeps its state); "built" to mark keys that are "building" as "ready" (a reindex
           has indexed every checkpoint written before they were registered)
  ARGV[2..] metadata keys (raw)

  Reply: for "?" and "pending", those keys; for "state", theirs; else the number of keys
  changed.
]]

if ARGV[1] == "?" then
  local missing = {}
  for i = 2, #ARGV do
    if redis.call("HEXISTS", KEYS[1], ARGV[i]) == 0 then missing[#missing + 1] = ARGV[i] end
  end
  return missing
end
if ARGV[1] == "state" then return redis.call("HMGET", KEYS[1], unpack(ARGV, 2)) end
if ARGV[1] == "pending" then
  local pending = {}
  local flat = redis.call("HGETALL", KEYS[1])
  for i = 1, #flat, 2 do
    if flat[i + 1] == "building" then pending[#pending + 1] = flat[i] end
  end
  return pending
end
local changed = 0
for i = 2, #ARGV do
  if ARGV[1] == "built" then
    if redis.call("HGET", KEYS[1], ARGV[i]) == "building" then
      redis.call("HSET", KEYS[1], ARGV[i], "ready")
      changed = changed + 1
    end
  else
    changed = changed + redis.call("HSETNX", KEYS[1], ARGV[i], ARGV[1])
  end
end
return changed
