#!lua flags=no-writes
--[[
  export_thread: the records of one thread, a bounded chunk per call, in the form
  import_thread.lua takes as ARGV. copy_thread is this script on the source thread, a chunk at
  a time, each chunk followed by import_thread on the target: the two threads live in
  different cluster slots, so one script cannot hold both.

  KEYS[1]  P:th:{T}         thread root (SET of namespaces)

  ARGV[1]  prefix P   ARGV[2]  hash tag {T}
  ARGV[3..6]  the cursor (see include/walk.lua): "0", "0", "", "" to start
  ARGV[7]  at most this many checkpoints per call
  ARGV[8]  and about this many bytes of values
  ARGV[9]  (optional) "check": only read the records, reply no records (the cursor alone)

  Counts: KEYS 1; ARGV 8..9
  Built by: core/calls.py export_thread()
  Reply: { cursor | nil, records ... } where the cursor (4 strings) goes on, nil at the end,
  and each record is one of
    "b", ns, ref, value                             a blob, before the checkpoints using it
    "c", ns, id, n, then n field/value pairs of the checkpoint hash
    "w", ns, id, n, then n field/value pairs of its writes hash
  Only checkpoints in their namespace index are exported, with their writes and blobs.
  A record that cannot be read (corrupt, of a layout no version reads) ends the walk: the
  reply is then { nil, "u", its key }, and copy_thread refuses the copy.
]]
-- requires: keyschema, refs, record, walk

local K = keyspace(ARGV[1], ARGV[2])
local max_count, max_bytes = tonumber(ARGV[7]), tonumber(ARGV[8])
local check_only = ARGV[9] == "check"
local out, count, bytes = { false }, 0, 0
local unreadable = nil  -- the key of a record that cannot be read
local function push_hash(kind, ns, id, flat)
  out[#out + 1] = kind
  out[#out + 1] = ns
  out[#out + 1] = id
  out[#out + 1] = #flat / 2
  for _, v in ipairs(flat) do
    out[#out + 1] = v
    bytes = bytes + #v
  end
end

local function visit(ns, at)
  local sent = {}  -- blobs already in this reply (consecutive checkpoints share most)
  while count < max_count and bytes < max_bytes do
    local lower = (at == "") and "-" or ("(" .. at)
    local want = math.min(100, max_count - count)
    local ids = redis.call("ZRANGE", K.index(ns), lower, "+", "BYLEX", "LIMIT", 0, want)
    for _, id in ipairs(ids) do
      at = id
      local readable, flat = pcall(record_flat, K.checkpoint(ns, id))
      if not readable then
        unreadable = K.checkpoint(ns, id)
        return at
      end
      if check_only then
        count = count + 1
      elseif #flat > 0 then
        for j = 1, #flat, 2 do
          if flat[j] == "bv" then
            for _, ref in ipairs(split_refs(flat[j + 1])) do
              if not sent[ref] then
                sent[ref] = true
                local value = redis.call("GET", K.blob(ns, ref))
                if value then
                  out[#out + 1] = "b"
                  out[#out + 1] = ns
                  out[#out + 1] = ref
                  out[#out + 1] = value
                  bytes = bytes + #value
                end
              end
            end
          end
        end
        push_hash("c", ns, id, flat)
        local writes = redis.call("HGETALL", K.writes(ns, id))
        if #writes > 0 then push_hash("w", ns, id, writes) end
        count = count + 1
      end
      if count >= max_count or bytes >= max_bytes then return at end
    end
    if #ids < want then return nil end
  end
  return at
end

local cursor = walk_namespaces(KEYS[1], { ARGV[3], ARGV[4], ARGV[5], ARGV[6] }, visit)
if unreadable then return { false, "u", unreadable } end
out[1] = cursor or false
return out
