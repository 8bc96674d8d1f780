#!lua flags=no-writes
--[[
  get_write_paths: the task path of each task with pending writes, for some checkpoints of one
  namespace. CheckpointTuple carries no task path, yet the order of a superstep's writes is
  (task path, task id, index) (writes_sort_key): the migration copies a rediskv source's
  writes with their paths, so that the copy replays a DeltaChannel's writes in the same order.
  Reads only: no expiry is renewed.

  KEYS[1]  P:idx:{T}:N      namespace index (ZSET of checkpoint ids)

  ARGV[1]  prefix P   ARGV[2]  hash tag {T}   ARGV[3]  namespace N (encoded)
  ARGV[4..] checkpoint ids (raw), at most a few thousand

  Counts: KEYS 1; ARGV 3..
  Built by: core/calls.py get_write_paths()
  Reply: one entry per id, in order: { task id (encoded), task path, ... } of its pending
  writes, one pair per task (empty for a checkpoint without writes, or gone).
]]
-- requires: keyschema, record

local K = keyspace(ARGV[1], ARGV[2])
local ns = ARGV[3]
local reply = {}
for i = 4, #ARGV do
  local pairs_out, seen = {}, {}
  local writes = checkpoint_writes(K, ns, ARGV[i])
  for j = 1, #writes, 2 do
    -- field "<task id>:<index>"; record "<path length>:<channel length>:<path><channel><value>"
    local task = string.match(writes[j], "^(.*):%d+$")
    local path_len, start = string.match(writes[j + 1], "^(%d+):%d+:()")
    if task and path_len and not seen[task] then
      seen[task] = true
      pairs_out[#pairs_out + 1] = task
      pairs_out[#pairs_out + 1] = string.sub(writes[j + 1], start, start + tonumber(path_len) - 1)
    end
  end
  reply[#reply + 1] = pairs_out
end
return reply
