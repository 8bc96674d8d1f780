#!lua flags=no-writes
--[[
  metadata_index_threads: the threads of a chunk of a global metadata index (standalone
  servers), for delete_for_runs, which visits only the threads of its runs (run_id's index).

  KEYS[1]  P:mi:<key>:<value>  the metadata index (ZSET, all scored 0, of "<id>\0{T}:N")

  ARGV[1]  prefix P
  ARGV[2]  the indexed metadata key (raw): its entry in the registry P:mk must be "ready"
  ARGV[3]  after: only members lexically above this one ("" for the first chunk)
  ARGV[4]  how many members to read

  Reply: "BUILDING" when the index is not known to be complete (the client visits every
  thread instead); else { last member read | false, tag, tag, ... }: the tags of the chunk's
  members (a thread once per chunk), and where the next chunk starts (false: no more).
  Members of checkpoints gone are read too: a thread visited for nothing costs a call.
]]
-- @include keyschema

if redis.call("HGET", ARGV[1] .. ":mk", ARGV[2]) ~= "ready" then return "BUILDING" end
local lower = (ARGV[3] ~= "") and ("(" .. ARGV[3]) or "-"
local count = tonumber(ARGV[4])
local members = redis.call("ZRANGEBYLEX", KEYS[1], lower, "+", "LIMIT", 0, count)
local out = { #members == count and members[#members] or false }
local seen = {}
for _, member in ipairs(members) do
  local _, tag = parse_member(member)
  if not seen[tag] then
    seen[tag] = true
    out[#out + 1] = tag
  end
end
return out
