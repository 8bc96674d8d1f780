#!lua
--[[
  register_metadata_index: the registry of indexed metadata keys (standalone servers), which
  tells readers whether a global metadata index holds every checkpoint.

  KEYS[1]  P:mk             the registry (HASH: encoded metadata key -> "ready" | "building")

  ARGV[1]  "?" to ask which of the keys are not registered yet (nothing written);
           "ready" or "building" to register them in that state (a key already registered
           keeps its state)
  ARGV[2..] metadata keys (encoded)

  Reply: for "?", the keys that are not registered; else the number of keys registered now.
]]

if ARGV[1] == "?" then
  local missing = {}
  for i = 2, #ARGV do
    if redis.call("HEXISTS", KEYS[1], ARGV[i]) == 0 then missing[#missing + 1] = ARGV[i] end
  end
  return missing
end
local added = 0
for i = 2, #ARGV do added = added + redis.call("HSETNX", KEYS[1], ARGV[i], ARGV[1]) end
return added
