#!lua flags=no-writes
--[[
  run_threads: the threads that may hold checkpoints of a run, a chunk at a time (standalone
  servers), for delete_for_runs, which visits only those: the threads of run_id's metadata
  index under the run, and (with the first chunk) those whose runs that index does not name
  by their text (P:rx, see note_unindexed_run in include/indexes.lua).

  KEYS[1]  P:mi:run_id:<value>  run_id's metadata index under the run (ZSET, all scored 0, of
                                "<id>\0{T}:N")
  KEYS[2]  P:rx                 threads with runs that index does not name (SET of tags)

  ARGV[1]  prefix P
  ARGV[2]  after: only members lexically above this one ("" for the first chunk)
  ARGV[3]  how many members to read

  Counts: KEYS 2; ARGV 3
  Built by: core/calls.py run_threads()
  Reply: "BUILDING" when run_id's index is not known to be complete (not registered, or
  registered on a store that had checkpoints and not rebuilt since): the client visits every
  thread instead. Else { last member read | false, tag, tag, ... }: the tags (a thread once
  per chunk), and where the next chunk starts (false: no more). Members of checkpoints gone
  are read too: a thread visited for nothing costs a call.
]]
-- requires: replies, keyschema

if redis.call("HGET", ARGV[1] .. ":mk", "run_id") ~= "ready" then return BUILDING end
local lower = (ARGV[2] ~= "") and ("(" .. ARGV[2]) or "-"
local count = tonumber(ARGV[3])
local members = redis.call("ZRANGEBYLEX", KEYS[1], lower, "+", "LIMIT", 0, count)
local out = { #members == count and members[#members] or false }
local seen = {}
local function add(tag)
  if not seen[tag] then
    seen[tag] = true
    out[#out + 1] = tag
  end
end
for _, member in ipairs(members) do
  local _, tag = parse_member(member)
  add(tag)
end
if ARGV[2] == "" then
  for _, tag in ipairs(redis.call("SMEMBERS", KEYS[2])) do add(tag) end
end
return out
