-- requires: keyschema, refs, expiry, record, drop
-- Bounded history (the savers' keep_last): after a put, only the newest N checkpoints of its
-- namespace stay.
--
-- Delta channels (include/delta.lua): a checkpoint that stores no value of a DeltaChannel
-- rebuilds it from its ancestors, back to the seed (the nearest one that stores a snapshot).
-- So every checkpoint written with keep_last records, in its field "df", where each of its
-- unsnapshotted delta channels starts: "<channel>=<seed id>,..." (both encoded; seed "?" when
-- unknown, because the parent was written without keep_last). Nothing older than the oldest
-- seed of a kept checkpoint is trimmed; an unknown seed stops trimming until that channel is
-- snapshotted again (LangGraph snapshots every written delta channel at least every 5,000
-- steps). A checkpoint that rebuilds delta channels is hidden from get and list (field "h")
-- once it leaves the window.

-- Checkpoints (and parked blobs) removed per put at most: a long thread that keep_last is
-- turned on for shrinks over its next puts, at a constant cost per put.
local TRIM_STEP = 8
-- Old checkpoints looked at per put at most. One whose record cannot be read stays where it is
-- (drop_checkpoint: its blobs and index entries are unknown; a delete removes it), so every
-- put passes it again; a namespace with more of them than this is not trimmed past them.
local TRIM_EXAMINED = 64

-- The "df" field of a new checkpoint with parent `parent` ("" for none). `counters`: the
-- canonical JSON of its metadata counters_since_delta_snapshot (nil when absent); `refs`: the
-- refs of the values it stores.
local function delta_seeds(K, ns, parent, counters, refs)
  if not counters or counters == "null" or parent == "" then return "" end
  local ok, decoded = pcall(cjson.decode, counters)
  if not ok or type(decoded) ~= "table" then return "" end
  local open = {}
  for name in pairs(decoded) do open[enc(tostring(name))] = true end
  for _, ref in ipairs(refs) do open[ref_channel(ref)] = nil end  -- snapshotted here
  if next(open) == nil then return "" end
  -- no parent record, or one that cannot be read: nothing older is read (past a parent that
  -- cannot be read no reader rebuilds the channels, whatever is kept)
  local fields = readable_record_fields(K.checkpoint(ns, parent), "bv", "df")
  if not fields or not fields[1] then return "" end
  local at_parent = {}
  for _, ref in ipairs(value_refs(fields[1])) do at_parent[ref_channel(ref)] = true end
  local inherited = {}
  for _, part in ipairs(split_refs(fields[2])) do
    local eq = string.find(part, "=", 1, true)
    inherited[string.sub(part, 1, eq - 1)] = string.sub(part, eq + 1)
  end
  local written_at_parent = nil  -- encoded channels the parent's writes hold, read once
  local parts = {}
  for channel in pairs(open) do
    local seed
    if at_parent[channel] then
      seed = enc(parent)  -- the parent holds a snapshot
    elseif inherited[channel] then
      seed = inherited[channel]
    elseif fields[2] then
      -- no state before the parent: what the parent's writes hold is all there is, and a
      -- channel never written (LangGraph lists it, and never snapshots it) needs nothing
      if written_at_parent == nil then
        -- false when they cannot be read (a record cut in them): the parent is then the seed
        local readable, writes = pcall(checkpoint_write_records, K, ns, parent)
        written_at_parent = readable and {}
        for _, write in ipairs(readable and writes or {}) do
          written_at_parent[enc(record_channel(write))] = true
        end
      end
      if not written_at_parent or written_at_parent[channel] then seed = enc(parent) end
    else
      seed = "?"
    end
    if seed then parts[#parts + 1] = channel .. "=" .. seed end
  end
  return table.concat(parts, ",")
end

-- The oldest checkpoint id that a "df" field needs: nil for none, "" when unknown (all).
local function oldest_seed(df)
  local oldest = nil
  for _, part in ipairs(split_refs(df)) do
    local seed = string.sub(part, string.find(part, "=", 1, true) + 1)
    if seed == "?" then return "" end
    seed = dec(seed)
    if oldest == nil or seed < oldest then oldest = seed end
  end
  return oldest
end

-- Trim namespace `ns` to its newest `keep` checkpoints (ids sort by time), at most TRIM_STEP
-- of them, oldest first, never past a seed a kept checkpoint needs. A trimmed checkpoint goes
-- with its writes and index entries; its blobs go unless a kept checkpoint uses them. While
-- more than `keep` remain (a long thread being shrunk), blobs no kept checkpoint uses are
-- parked in the loose-blob set; once only the kept ones remain, up to TRIM_STEP parked ones
-- are dropped per put. A checkpoint whose record cannot be read never stops a put: in the
-- window it needs nothing older, and out of it it stays, as prune leaves it (its blob refs,
-- run and metadata index entries are unknown: removed, they would be left where nothing finds
-- them again; delete_thread removes it whole, its blobs by the key pattern). Blobs it shares
-- with trimmed checkpoints go with them.
local function trim_history(K, ns, keep)
  local index = K.index(ns)
  local excess = redis.call("ZCARD", index) - keep
  if excess <= 0 then return end
  local floor, used = nil, {}
  for _, id in ipairs(redis.call("ZRANGE", index, -keep, -1)) do
    -- a kept record that cannot be read needs nothing older: no reader rebuilds its channels
    local fields = readable_record_fields(K.checkpoint(ns, id), "bv", "df",
      "m:counters_since_delta_snapshot") or {}
    for _, ref in ipairs(split_refs(fields[1])) do used[ref] = true end
    local seed = oldest_seed(fields[2])
    if fields[1] and not fields[2] and fields[3] and fields[3] ~= "null" and fields[3] ~= "{}" then
      seed = ""  -- written without keep_last, with delta channels: its seeds are unknown
    end
    if seed and (floor == nil or seed < floor) then floor = seed end
  end
  -- trimmed: the old checkpoints done with, those that cannot be read (left in place) too
  local refs, trimmed, dropped = {}, 0, 0
  for _, id in ipairs(redis.call("ZRANGE", index, 0, math.min(excess, TRIM_EXAMINED) - 1)) do
    if dropped == TRIM_STEP or floor and id >= floor then break end
    if drop_checkpoint(K, ns, id, refs) then dropped = dropped + 1 end
    trimmed = trimmed + 1
  end
  -- The checkpoint that just left the window, if not trimmed yet: when it rebuilds delta
  -- channels, the seeds it needs may be trimmed before it is (only the kept ones' are
  -- protected; two delta channels snapshotted at different steps need ever older ones), so
  -- it is hidden from get and list (field "h"); the delta walk still reads it.
  local leaving = redis.call("ZRANGE", index, -(keep + 1), -(keep + 1))[1]
  if leaving then
    local key = K.checkpoint(ns, leaving)
    -- (one that cannot be read is not hidden: reads name it)
    local fields = readable_record_fields(key, "bv", "df", "m:counters_since_delta_snapshot",
      "h") or {}
    local unknown = not fields[2] and fields[3] and fields[3] ~= "null" and fields[3] ~= "{}"
    if fields[1] and not fields[4] and (oldest_seed(fields[2]) or unknown) then
      pcall(set_record_field, key, "h", "1")  -- (a record cut in its large fields stays as it is)
    end
  end
  local loose = K.loose_blobs(ns)
  if trimmed == excess then
    for ref in pairs(refs) do
      if not used[ref] then
        redis.call("UNLINK", K.blob(ns, ref))
        redis.call("SREM", loose, ref)  -- if it was loose: the set must not outlive it
      end
    end
    for _, ref in ipairs(redis.call("SRANDMEMBER", loose, TRIM_STEP)) do
      if not used[ref] then
        redis.call("UNLINK", K.blob(ns, ref))
        redis.call("SREM", loose, ref)
      end
    end
  else
    local parked, lefts = {}, {}  -- blobs already gone (expired) are not parked
    for ref in pairs(refs) do
      local left = not used[ref] and redis.call("PTTL", K.blob(ns, ref))
      if left and left ~= -2 then
        parked[#parked + 1] = ref
        lefts[#lefts + 1] = left
      end
    end
    add_loose(K, ns, parked, lefts)
  end
end
