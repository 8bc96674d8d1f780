-- requires: replies, refs, expiry, record, indexes, ledger, registry
-- Reading checkpoints back.

-- The small fields of a record string that load_checkpoint reads (the small fields come
-- before md, ck and the pending writes: include/record.lua), whether it holds a checkpoint
-- (ck), and the byte where its large fields start. The client reads those from the string
-- itself, from that byte on. A field that cannot be read: nil, false and its byte (the
-- client's parse, from there, fails with an error that names the record).
local HEAD_FIELDS = { bv = true, h = true, r = true, ix = true, p = true }
local function record_head(packed)
  local fields, pos, size = {}, 1, #packed
  while pos <= size do
    local name, first, stop = field_at(packed, pos)
    if not stop or stop > size then return nil, false, pos end
    if LARGE_FIELDS[name] or is_write_field(name) then  -- md, then ck, then the writes
      local has_ck = name == "ck"
      if name == "md" and stop < size then
        local next_name, _, next_stop = field_at(packed, stop + 1)
        if not next_stop or next_stop > size then return nil, false, stop + 1 end
        has_ck = next_name == "ck"
      end
      return fields, has_ck, pos
    end
    if HEAD_FIELDS[name] and fields[name] == nil then fields[name] = string.sub(packed, first, stop) end
    pos = stop + 1
  end
  return fields, false, pos
end

-- The error a read replies when a key it needs is gone while keys that expire with it or
-- before it are still there: the server evicted it (maxmemory-policy). Said, never taken
-- for "no checkpoint": the app would start the conversation again over what is left. Only a
-- read that finds nothing checks this, so a read that finds its checkpoint pays nothing
-- for it. The client raises CheckpointLostError (transport_support.py's explain_response_error).
local function lost(key, what)
  return redis.error_reply(LOST .. " " .. key .. " " .. what)
end

-- The reply of a read that found no key of the thread at all (include/ledger.lua's
-- missing_root: "untraced"). On a standalone server the client declares the registry of live
-- threads P:alive (`declared`: the script's KEYS[2]) and the script asks it at once: an error
-- "LOST P:th:{T} thread due <deadline>" when it holds the thread as due (evicted whole),
-- else `absent` (a new or expired thread). On a cluster it lives on another node, and
-- KEYS[2], if any, is the thread's slot guard: 0, and the client asks the registry
-- (core/deadlines.py), then reads again.
local function untraced(K, declared, absent)
  if declared ~= K.live_threads then return 0 end
  local deadline = registry_due(declared, K.tag, now_seconds())
  if deadline then return lost(K.thread, "thread due " .. string.format("%.0f", deadline)) end
  return absent
end

-- Whether the thread's root names namespace `ns` while its index is gone by eviction: the
-- index is refreshed with the root by every put and read of the namespace, so it expires
-- before the root only when another namespace was written or read later, which the graph's
-- own namespace ("") is not (a parent writes its checkpoint after its subgraphs), and never
-- in a root that does not expire (an index emptied by readers is forgotten at once). A
-- namespace whose writes came before its first checkpoint (LangGraph stores a task's writes
-- as they come, a subgraph's before its first checkpoint) has no index either. Only keys of
-- the namespace tell the two apart, not the thread's runs or values, which any namespace's
-- puts write: a record of an id in its writes index is a checkpoint it had; writes hashes
-- without records are writes stored before its first checkpoint, unless the thread has runs
-- and the root names no other namespace (a put writes runs, a drop takes its checkpoints out
-- of them: they are this namespace's); neither is an index lost with what it led to.
local function index_lost(K, ns)
  if redis.call("SISMEMBER", K.thread, ns) == 0 then return false end
  -- its deadline ledger names records that should still be stored (include/ledger.lua)
  if redis.call("EXISTS", K.gc) == 0 and ledger_live(K, ns) then return true end
  if ns ~= "" and redis.call("PTTL", K.thread) ~= -1 then return false end
  local writes_only = false
  for _, id in ipairs(redis.call("SRANDMEMBER", K.writes_index(ns), 16)) do
    if redis.call("EXISTS", K.checkpoint(ns, id)) == 1 then return true end
    if redis.call("EXISTS", K.writes(ns, id)) == 1 then writes_only = true end
  end
  if not writes_only then return true end
  return redis.call("SCARD", K.thread) == 1 and redis.call("EXISTS", K.runs) == 1
end

-- One checkpoint as the Python core decodes it (core/codec.py's decode_record):
--   { ns, id, record, {ref, value, ...}, {field, write, ...}, parent id | false, large }
-- the record as stored (a string: include/record.lua; one written as a hash is packed so),
-- of which the client parses the large fields, from byte `large` on (a field read here costs
-- the server a copy of its bytes), the values of its blobs, the pending writes in its writes
-- hash (those in the record are in the record), and its parent's id.
-- A checkpoint comes back complete or not at all: nil when its record is gone (expired or
-- deleted), hidden, or when one of the blobs it references is; in that last case the key of
-- the missing blob comes second (a blob expires with its record or after it, so a record
-- without one has lost it: an eviction, see lost() in get_tuple.lua). With ttl > 0 every key read
-- gets a fresh expiry (refresh_on_read), and so do the indexes that lead to it: its run index
-- and the global metadata indexes it is in (extended only: they are shared).
-- `held` (optional): ref -> mark of the blobs the client holds; one still stored with that
-- mark comes back as "" (the client has its bytes: get_tuple.lua). `hidden_too`: a hidden
-- checkpoint comes back too (get_kept_checkpoint.lua).
local function load_checkpoint(K, ns, id, ttl, held, hidden_too)
  local cp = K.checkpoint(ns, id)
  local packed = redis.pcall("GET", cp)
  local rec, complete, large
  if type(packed) == "string" then
    rec, complete, large = record_head(packed)
    -- unreadable: the record as it is, which the client names in its error
    if not rec then return { ns, id, packed, {}, {}, false, large } end
  elseif not packed then
    return nil
  else  -- a record written as a hash (the GET failed with WRONGTYPE)
    rec = record(cp)
    packed = pack_record(flat_fields(rec))
    complete = rec.ck ~= nil
    large = select(3, record_head(packed))
  end
  -- h: kept by keep_last only for the delta chain of newer ones (include/trim.lua)
  if not complete or (rec.h and not hidden_too) then return nil end
  local refs = split_refs(rec.bv)
  local blobs = {}
  if #refs > 0 then
    local blob_keys, read = {}, {}  -- (read: the refs whose values are read)
    for _, ref in ipairs(refs) do
      local key, mark = K.blob(ns, ref), held and held[ref]
      if not (mark and has_mark(key, mark)) then
        blob_keys[#blob_keys + 1] = key
        read[ref] = #blob_keys
      end
    end
    local values = {}
    for first = 1, #blob_keys, 4000 do  -- unpack() has a limit of a few thousand values
      local chunk = redis.call("MGET", unpack(blob_keys, first, math.min(first + 3999, #blob_keys)))
      for _, v in ipairs(chunk) do values[#values + 1] = v end
    end
    for _, ref in ipairs(refs) do
      local value = ""  -- held by the client
      if read[ref] then value = values[read[ref]] end
      if not value then return nil, K.blob(ns, ref) end
      blobs[#blobs + 1] = ref
      blobs[#blobs + 1] = value
    end
  end
  local writes = redis.call("HGETALL", K.writes(ns, id))
  if ttl > 0 then
    keep_checkpoint_alive(K, ns, id, ttl, rec.bv, rec.r, rec.ix)
    if #writes > 0 then keep_alive(K.writes(ns, id), ttl, false) end
  end
  return { ns, id, packed, blobs, writes, rec.p or false, large }
end

-- True when the checkpoint's metadata matches every (field, canonical JSON) pair in `args`
-- (the caller's ARGV: a helper reads no globals, so that it also works in a function library)
-- from position `first` on, `count` pairs long. A missing key matches only JSON null. A
-- record that cannot be read matches: load_checkpoint sends it as it is, and the client's
-- error names it.
local function matches_filter(cp, args, first, count)
  if count == 0 then return true end
  local wanted = {}
  for j = 0, count - 1 do wanted[args[first + 2 * j]] = true end
  local readable, fields = pcall(record, cp, wanted)
  if not readable then return true end
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
