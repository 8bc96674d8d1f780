-- requires: keyschema, refs, record
-- Delta channels (LangGraph's DeltaChannel).
--
-- A DeltaChannel stores its value only now and then (a `_DeltaSnapshot` blob, every
-- `snapshot_frequency` updates); at the other checkpoints it stores nothing, and its value is
-- rebuilt from the nearest ancestor that stores one (the seed) plus the writes stored at that
-- ancestor and at every ancestor after it. So a checkpoint depends on a stretch of its parent
-- chain, and whatever removes checkpoints must keep that stretch.

-- The delta channels checkpoint `id` stores no value for, as { [raw name] = true } and their
-- count. LangGraph lists every DeltaChannel that was not snapshotted at a checkpoint in its
-- metadata `counters_since_delta_snapshot` (kept here as the canonical JSON field
-- "m:counters_since_delta_snapshot"); a channel the checkpoint stores anyway is left out.
-- Returns nil when that field cannot be read: the caller must then assume the worst.
local function unsnapshotted_channels(K, ns, id)
  local fields = record_fields(K.checkpoint(ns, id), "m:counters_since_delta_snapshot", "bv")
  if not fields[1] or fields[1] == "null" then return {}, 0 end
  local ok, counters = pcall(cjson.decode, fields[1])
  if not ok or type(counters) ~= "table" then return nil, 0 end
  local open, by_enc, count = {}, {}, 0
  for name in pairs(counters) do
    if type(name) ~= "string" then return nil, 0 end
    open[name] = true
    by_enc[enc(name)] = name
    count = count + 1
  end
  for _, ref in ipairs(value_refs(fields[2])) do  -- (a base is not the channel's value)
    local name = by_enc[ref_channel(ref)]
    if name and open[name] and redis.call("EXISTS", K.blob(ns, ref)) == 1 then
      open[name] = nil
      count = count - 1
    end
  end
  return open, count
end

-- The ancestors of checkpoint `id` (nearest first) that rebuilding its delta channels reads:
-- its parent chain up to the farthest ancestor holding a write to one of those channels or the
-- seed of one. Past that ancestor nothing contributes: every channel found its seed, or no
-- older checkpoint holds anything for it. When the checkpoint's counters cannot be read, the
-- whole parent chain. A parent id seen twice (a cycle, which LangGraph never writes) ends it.
local function delta_dependencies(K, ns, id)
  local chain, needed = {}, 0
  local readable, open, count = pcall(unsnapshotted_channels, K, ns, id)
  -- a record that cannot be read has no state to rebuild (get_tuple names it)
  if not readable or open ~= nil and count == 0 then return chain end
  local by_enc = {}
  for name in pairs(open or {}) do by_enc[enc(name)] = name end
  local seen = { [id] = true }
  local cursor = record_field(K.checkpoint(ns, id), "p")
  while cursor and not seen[cursor] do
    local cp = K.checkpoint(ns, cursor)
    local rec = nil  -- (without open channels, only the parent is read)
    if open then
      readable, rec = pcall(record, cp)
      if not readable then  -- an ancestor that cannot be read stays: the walk ends at it
        chain[#chain + 1] = cursor
        needed = #chain
        break
      end
    end
    if rec and next(rec) == nil or not rec and redis.call("EXISTS", cp) == 0 then break end
    seen[cursor] = true
    chain[#chain + 1] = cursor
    if open == nil then
      needed = #chain
    else
      for _, write in ipairs(checkpoint_write_records(K, ns, cursor, rec)) do
        if open[record_channel(write)] then
          needed = #chain
          break
        end
      end
      for _, ref in ipairs(value_refs(rec.bv)) do
        local name = by_enc[ref_channel(ref)]
        if name and open[name] and redis.call("EXISTS", K.blob(ns, ref)) == 1 then
          open[name] = nil
          count = count - 1
          needed = #chain
        end
      end
      if count == 0 then break end
    end
    if rec then
      cursor = rec.p
    else
      local parent = readable_record_fields(cp, "p")
      if not parent then  -- (it stays: see above)
        needed = #chain
        break
      end
      cursor = parent[1]
    end
  end
  for i = #chain, needed + 1, -1 do chain[i] = nil end
  return chain
end
