#!lua flags=no-writes
--[[
  thread_lists: on a cluster, what a thread's entries in the threads-by-value lists are known
  to hold (include/lists.lua): its incarnation and the lists.

  KEYS[1]  P:tb:{T}         the thread's bounds (HASH)

  Reply: { inc | false, S, S, ... }
]]

local flat = redis.call("HGETALL", KEYS[1])
local out = { false }
for j = 1, #flat, 2 do
  if flat[j] == "" then out[1] = flat[j + 1] else out[#out + 1] = flat[j] end
end
return out
