#!lua
--[[
  register_metadata_index: the registry of indexed metadata keys (on a cluster: only the
  threads-by-value lists' entry), which
  tells readers whether a global metadata index holds every checkpoint.

  KEYS[1]  P:mk             the registry (HASH: metadata key -> "ready" | "building" |
                            "building:<token>", see "claim")

  ARGV[1]  "?" to ask which of the keys are not registered yet (nothing written); "claim"
           to take the registered keys that are building ("building", or "building:<token>"
           of a reindex that stopped, or runs meanwhile) for a reindex, as
           "building:<ARGV[2]>"; "state" for the states of the keys (false: not registered);
           "ready" or "building" to register them in that state (a key already registered
           keeps its state); "built" to mark the keys that a reindex claimed as
           "building:<ARGV[2]>", and still holds so, as "ready" (it has indexed every
           checkpoint written before they were registered). A key building again otherwise
           (registered again by a put after the registry was lost, or claimed by another
           reindex) stays building: the threads indexed before may have missed it.
  ARGV[2..] metadata keys (raw); for "claim" and "built", ARGV[2] is the reindex's token
           and the keys follow

  Counts: KEYS 1; ARGV 1..
  Built by: core/calls.py register_metadata_index()
  Reply: for "?" and "claim", those keys; for "state", theirs; else the number of keys
  changed.
]]
-- requires:

if ARGV[1] == "?" then
  local missing = {}
  for i = 2, #ARGV do
    if redis.call("HEXISTS", KEYS[1], ARGV[i]) == 0 then missing[#missing + 1] = ARGV[i] end
  end
  return missing
end
if ARGV[1] == "state" then return redis.call("HMGET", KEYS[1], unpack(ARGV, 2)) end
if ARGV[1] == "claim" then
  local claimed = {}
  local flat = redis.call("HGETALL", KEYS[1])
  for i = 1, #flat, 2 do
    if string.sub(flat[i + 1], 1, 8) == "building" then
      redis.call("HSET", KEYS[1], flat[i], "building:" .. ARGV[2])
      claimed[#claimed + 1] = flat[i]
    end
  end
  return claimed
end
local changed = 0
if ARGV[1] == "built" then
  for i = 3, #ARGV do
    if redis.call("HGET", KEYS[1], ARGV[i]) == "building:" .. ARGV[2] then
      redis.call("HSET", KEYS[1], ARGV[i], "ready")
      changed = changed + 1
    end
  end
  return changed
end
for i = 2, #ARGV do
  changed = changed + redis.call("HSETNX", KEYS[1], ARGV[i], ARGV[1])
end
return changed
