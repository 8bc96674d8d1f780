#!lua flags=no-writes
--[[
  thread_lists: on a cluster, what a thread's entries in the threads-by-value lists are known
  to hold (include/lists.lua).

  KEYS[1]  P:tb:{T}         the thread's bounds (HASH)

  ARGV[1]  (optional) a list S, or "*"

  Counts: KEYS 1; ARGV 0..1
  Built by: core/calls.py thread_lists()
  Reply: without ARGV[1], { inc | false, S, S, ... }: its incarnation and lists; with S,
  { inc | false, newest | false }: the highest id_score() of its checkpoints with S (a reader
  visits threads by it, newest first); with "*", every field and value (the checker's).
]]
-- requires:

if ARGV[1] == "*" then return redis.call("HGETALL", KEYS[1]) end
if ARGV[1] then return redis.call("HMGET", KEYS[1], "", "@" .. ARGV[1]) end
local flat = redis.call("HGETALL", KEYS[1])
local out = { false }
for j = 1, #flat, 2 do
  if flat[j] == "" then
    out[1] = flat[j + 1]
  elseif string.byte(flat[j], 1) ~= 64 then  -- (not a newest score, "@S")
    out[#out + 1] = flat[j]
  end
end
return out
