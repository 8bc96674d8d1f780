#!lua flags=allow-oom
--[[
  list_indexed: one page of checkpoints of every thread whose metadata has one indexed value,
  newest first, filtered on the server by the rest of the filter. Only on a standalone server:
  it reads the checkpoints of many threads, which a cluster spreads over its nodes.

  KEYS[1]  P:mi:<key>:<value>  the metadata index (ZSET, all scored 0, of "<id>\0{T}:N")

  ARGV[1]  prefix P
  ARGV[2]  before: only members lexically below this (a checkpoint id or a member; "" for none)
  ARGV[3]  page size   ARGV[4]  scan budget: at most this many members examined
  ARGV[5]  the indexed metadata key (raw): its entry in the registry P:mk must be "ready"
  ARGV[6]  f, the number of filter pairs, then f pairs: field "m:<key>", canonical JSON

  Counts: KEYS 1; ARGV 6+2n
  Built by: core/calls.py list_indexed()
  Reply: "BUILDING" when the index is not known to be complete (the key was registered on a
  store that had checkpoints, and no reindex has finished): the client scans instead. Else
  { cursor | nil, tag, record, tag, record, ... } with records laid out as in get_tuple. The
  cursor is the `before` of the next page (every member above it has been examined); nil
  means there is nothing more. Members whose checkpoint is gone (deleted or expired, or its
  thread deleted) are removed on the way; incomplete checkpoints are skipped.
]]
-- requires: replies, keyschema, records

local prefix, before = ARGV[1], ARGV[2]
local page, budget, nfilter = tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[6])
if redis.call("HGET", prefix .. ":mk", ARGV[5]) ~= "ready" then return BUILDING end
local upper = (before ~= "") and ("(" .. before) or "+"
local reply = { false }
local taken, scanned = 0, 0
while taken < page and scanned < budget do
  local want = math.min(128, budget - scanned)
  local members = redis.call("ZREVRANGEBYLEX", KEYS[1], upper, "-", "LIMIT", 0, want)
  for _, member in ipairs(members) do
    scanned = scanned + 1
    upper = "(" .. member
    local id, tag, ns = parse_member(member)
    local K = keyspace(prefix, tag)
    local cp = K.checkpoint(ns, id)
    if redis.call("EXISTS", cp) == 0 then
      redis.call("ZREM", KEYS[1], member)
    elseif redis.call("EXISTS", K.thread) == 1 and matches_filter(cp, ARGV, 7, nfilter) then
      local record, missing = load_checkpoint(K, ns, id, 0)
      if missing then return lost(missing, "value") end
      if record then
        reply[#reply + 1] = tag
        reply[#reply + 1] = record
        taken = taken + 1
        if taken >= page then break end
      end
    end
  end
  -- exhausted only when a short batch was examined to its end (not cut off by a full page)
  if #members < want and taken < page then return reply end
end
reply[1] = string.sub(upper, 2)
return reply
