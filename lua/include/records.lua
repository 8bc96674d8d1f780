-- Reading checkpoints back; inlined where a script says `-- @include records` (after keyschema).

-- One checkpoint as the Python core decodes it:
--   { ns, id, checkpoint, metadata, parent id | false, {ref, value, ...}, {field, record, ...} }
-- A checkpoint comes back complete or not at all: nil when its hash is gone (expired or
-- deleted), hidden, or when one of the blobs it references is. With ttl > 0 every key read gets a
-- fresh expiry (refresh_on_read), and so do the indexes that lead to it: its run index and
-- the global metadata indexes it is in (extended only: they are shared).
local function load_checkpoint(K, ns, id, ttl)
  local cp = K.checkpoint(ns, id)
  local rec = record(cp)
  -- h: kept by keep_last only for the delta chain of newer ones (include/trim.lua)
  if not rec.ck or rec.h then return nil end
  local refs = split_refs(rec.bv)
  local blobs = {}
  if #refs > 0 then
    local blob_keys = {}
    for j, ref in ipairs(refs) do blob_keys[j] = K.blob(ns, ref) end
    local values = {}
    for first = 1, #blob_keys, 4000 do  -- unpack() has a limit of a few thousand values
      local chunk = redis.call("MGET", unpack(blob_keys, first, math.min(first + 3999, #blob_keys)))
      for _, v in ipairs(chunk) do values[#values + 1] = v end
    end
    for j, ref in ipairs(refs) do
      if not values[j] then return nil end
      blobs[#blobs + 1] = ref
      blobs[#blobs + 1] = values[j]
    end
  end
  local writes, in_hash = checkpoint_writes(K, ns, id, rec)
  if ttl > 0 then
    keep_checkpoint_alive(K, ns, id, ttl, rec.bv, rec.r, rec.ix)
    if in_hash then keep_alive(K.writes(ns, id), ttl, false) end
  end
  return { ns, id, rec.ck, rec.md, rec.p or false, blobs, writes }
end

-- True when the checkpoint's metadata matches every (field, canonical JSON) pair in `args`
-- (the caller's ARGV: a helper reads no globals, so that it also works in a function library)
-- from position `first` on, `count` pairs long. A missing key matches only JSON null.
local function matches_filter(cp, args, first, count)
  if count == 0 then return true end
  local wanted = {}
  for j = 0, count - 1 do wanted[args[first + 2 * j]] = true end
  local fields = record(cp, wanted)
  for j = 0, count - 1 do
    local want, have = args[first + 2 * j + 1], fields[args[first + 2 * j]]
    if have then
      if have ~= want then return false end
    elseif want ~= "null" then
      return false
    end
  end
  return true
end
