#!lua
--[[
  import_thread: copy_thread's target side, in bounded steps: "begin", then one "chunk" call
  per chunk that export_thread.lua replies, then "publish".

  KEYS[1]  P:th:{T}         thread root of the target (SET of namespaces)
  KEYS[2]  P:runs:{T}       run ids of the target
  KEYS[3]  P:gc:{T}         gc root of the target

  ARGV[1]  prefix P   ARGV[2]  hash tag {T} of the target
  ARGV[3]  the saver's default ttl in seconds (0: none); the target's own setting wins
  ARGV[4]  "begin" | "chunk" | "publish"
  ARGV[5]  "<n>:<token>": the copy's job number from "begin" ("0": the target exists, records
           go straight in; "begin" sends 0), and a token the client drew for the copy, which
           "begin" keeps with the job: a number is used again once the target's jobs are all
           gone, so "chunk" and "publish" of a copy whose job was discarded would otherwise
           write into the job of another copy begun since
  ARGV[6]  "1" when the store keeps global indexes (standalone servers), "~<hint>" on a
           cluster (the threads-by-value lists written ahead, include/lists.lua), else "0"
  ARGV[7..] ("chunk") the records, as export_thread.lua replies them

  Counts: KEYS 3; ARGV 6..
  Built by: core/calls.py import_thread()
  Reply: "begin": the job number (0 when the target exists), or -1 when the target has
  garbage to reap first; "chunk": the number of checkpoints written; "publish": 0. "chunk"
  and "publish" reply -1, writing nothing, when the copy was discarded meanwhile (a writer or
  a delete of the target reaped it). On a cluster "chunk" may reply
  { "INDEX", inc, S, score, ... } instead, having written nothing but the target's
  incarnation: the client enters the target in those lists and sends the chunk again.

  A target that does not exist yet becomes visible whole at "publish": the chunks write its
  keys, but its root and runs set are a job of its gc root (kind copy) until then, so readers
  find nothing and a writer of the target waits; a copy whose client dies midway is discarded
  by whoever reaps the target next (a writer, delete_thread, check_invariants). A target that
  exists takes the records chunk by chunk (records with the same ids are replaced), each
  checkpoint whole with its blobs.
]]
-- requires: keyschema, refs, expiry, record, indexes, lists, jobs, ledger

local prefix, tag, mode = ARGV[1], ARGV[2], ARGV[4]
local job, token = string.match(ARGV[5], "^(%d+):(.*)$")
local n = tonumber(job)
local K = keyspace(prefix, tag)
local G = jobspace(prefix, tag, n)

if mode == "begin" then
  if redis.call("EXISTS", KEYS[3]) == 1 then return -1 end
  if redis.call("EXISTS", KEYS[1]) == 1 then return 0 end
  n = new_job(KEYS[3], "copy")
  redis.call("HSET", jobspace(prefix, tag, n).state, "tok", token)
  return n
end

if n > 0 then
  if redis.call("SISMEMBER", KEYS[3], "copy:" .. n) == 0
    or redis.call("HGET", G.state, "tok") ~= token
    or redis.call("HEXISTS", G.state, "x") == 1 then
    return -1
  end
elseif redis.call("EXISTS", KEYS[3]) == 1 then
  return -1
end
-- an unpublished copy hangs off the job's containers, exactly what reaping discards
local root = (n > 0) and G.part("th") or KEYS[1]
local runs = (n > 0) and G.part("runs") or KEYS[2]

if mode == "publish" then
  if n == 0 then return 0 end
  for _, pair in ipairs({ { root, KEYS[1] }, { runs, KEYS[2] } }) do
    if redis.call("EXISTS", pair[1]) == 1 then redis.call("RENAME", pair[1], pair[2]) end
  end
  redis.call("UNLINK", G.state)
  redis.call("SREM", KEYS[3], "copy:" .. n)
  return 0
end

local ttl = thread_ttl(K, tonumber(ARGV[3]))
if string.sub(ARGV[6], 1, 1) == "~" then  -- a cluster: the chunk's lists hold the target first
  local needs, j = {}, 7
  while j <= #ARGV do
    if ARGV[j] == "b" then
      j = j + 4
    else
      local count = tonumber(ARGV[j + 3])
      if ARGV[j] == "c" then
        for f = 0, count - 1 do
          add_list_needs(needs, ARGV[j + 4 + 2 * f], ARGV[j + 5 + 2 * f], ARGV[j + 2])
        end
      end
      j = j + 4 + 2 * count
    end
  end
  local refused = cover(K, string.sub(ARGV[6], 2), needs, ttl)
  if refused then return refused end
end
local root_created = redis.call("EXISTS", root) == 0
local written = 0
-- A copied record's global index entries are made as put_checkpoint makes them, from its
-- metadata and the keys registered now, not taken from the source's ix: the source may have
-- been written before an index was (a reindex running meanwhile would miss the copy).
local registered = {}
if ARGV[6] == "1" then
  for _, key in ipairs(redis.call("HKEYS", prefix .. ":mk")) do registered[key] = true end
end
local function global_entries(source_ix, flat)
  local ix, have = {}, {}
  local function add(suffix)
    if not have[suffix] then
      have[suffix] = true
      ix[#ix + 1] = suffix
    end
  end
  for _, suffix in ipairs(split_refs(source_ix)) do  -- (the source's saver indexes them)
    if not by_value_suffix(suffix) then add(suffix) end
  end
  for j = 1, #flat, 2 do
    if string.sub(flat[j], 1, 2) == "m:" then
      local indexed, by_value = metadata_entries(string.sub(flat[j], 3), flat[j + 1], registered)
      if indexed then add(indexed) end
      if by_value then add(by_value) end
    end
  end
  return ix
end
-- A record's fields with ix set to `ix` (none when empty): where the source had it, else
-- after bv, p and r, as put_checkpoint orders them.
local function with_ix(flat, ix)
  local out, after, placed = {}, 0, false
  for j = 1, #flat, 2 do
    if flat[j] ~= "ix" then
      out[#out + 1] = flat[j]
      out[#out + 1] = flat[j + 1]
      if flat[j] == "bv" or flat[j] == "p" or flat[j] == "r" then after = #out end
    elseif #ix > 0 then
      out[#out + 1] = "ix"
      out[#out + 1] = table.concat(ix, ",")
      placed = true
    end
  end
  if #ix > 0 and not placed then
    table.insert(out, after + 1, table.concat(ix, ","))
    table.insert(out, after + 1, "ix")
  end
  return out
end
local i = 7
while i <= #ARGV do
  local kind, ns = ARGV[i], ARGV[i + 1]
  if kind == "b" then
    local ref = ARGV[i + 2]
    local key = K.blob(ns, ref)
    -- the target may have this blob already, shared with its own checkpoints: its expiry
    -- only grows (KEEPTTL, then keep_alive); without a ttl it stops expiring
    local left = redis.call("PTTL", key)
    -- a stored value keeps its bytes (values may be compressed against it), but for one
    -- stored against a base, which a full one replaces; the target's records that reference
    -- it list its base, and so do the copied records (below)
    if left == -2 or (not blob_base(ARGV[i + 3]) and stored_base(key)) then
      redis.call("SET", key, ARGV[i + 3], "KEEPTTL")
    end
    keep_alive(key, ttl, left == -2, left)
    if ttl > 0 and (left == -1 or left > ttl * 1000) then
      -- it outlives the copied checkpoints that use it: loose, so that a delete finds it
      add_loose(K, ns, { ref }, { left })
    end
    i = i + 4
  else
    local id, count = ARGV[i + 2], tonumber(ARGV[i + 3])
    local key = (kind == "c") and K.checkpoint(ns, id) or K.writes(ns, id)
    if kind == "c" then
      -- a record replaced: its blobs that the new one does not reference become loose (other
      -- checkpoints may still use them; a delete or prune of the thread finds them there)
      local old = record_fields(key, "ix", "bv", "r")
      unindex_checkpoint(K, ns, id, old[1])
      if old[3] then unindex_run(K, runs, old[3], ns, id) end
      -- and its pending writes go with it: the source's, if any, follow this record
      redis.call("UNLINK", K.writes(ns, id))
      redis.call("SREM", K.writes_index(ns), id)
      if old[2] then
        local new_refs = {}
        for j = 0, count - 1 do
          if ARGV[i + 4 + 2 * j] == "bv" then
            for _, ref in ipairs(split_refs(ARGV[i + 5 + 2 * j])) do new_refs[ref] = true end
          end
        end
        local refs, lefts = {}, {}
        for _, ref in ipairs(split_refs(old[2])) do
          if not new_refs[ref] then
            local left = redis.call("PTTL", K.blob(ns, ref))
            if left ~= -2 then
              refs[#refs + 1] = ref
              lefts[#lefts + 1] = left
            end
          end
        end
        add_loose(K, ns, refs, lefts)  -- (nothing added: the set keeps the expiry it has)
      end
    end
    redis.call("DEL", key)
    local flat = {}  -- a checkpoint record's fields, written whole after the loop
    local source_ix = false
    for j = 0, count - 1 do
      local field, value = ARGV[i + 4 + 2 * j], ARGV[i + 5 + 2 * j]
      if kind == "c" and field == "bv" then
        local added
        value, added = with_stored_bases(K, ns, value)
        for _, base in ipairs(added) do  -- they live as long as the copy, at least
          local left = redis.call("PTTL", K.blob(ns, base))
          keep_alive(K.blob(ns, base), ttl, false, left)
          if ttl > 0 and (left == -1 or left > ttl * 1000) then add_loose(K, ns, { base }, { left }) end
        end
      end
      if kind == "c" and field == "ix" then
        source_ix = value  -- (its place kept: the copy's fields in the source's order)
        flat[#flat + 1] = field
        flat[#flat + 1] = false
      elseif kind == "c" then
        flat[#flat + 1] = field
        flat[#flat + 1] = value
      else
        redis.call("HSET", key, field, value)
      end
      if kind == "c" and field == "r" then
        -- containers the target may already have: their expiry only grows (keep_alive)
        local runs_created = redis.call("EXISTS", runs) == 0
        local run_created = redis.call("EXISTS", K.run(value)) == 0
        redis.call("SADD", runs, value)
        redis.call("SADD", K.run(value), ns .. ":" .. id)
        keep_alive(runs, ttl, runs_created)
        keep_alive(K.run(value), ttl, run_created)
      end
    end
    if kind == "c" then
      local ix = ARGV[6] == "1" and global_entries(source_ix, flat) or {}
      if ARGV[6] == "1" then
        local run, run_canonical = nil, nil
        for j = 1, #flat, 2 do
          if flat[j] == "r" then run = flat[j + 1] end
          if flat[j] == "m:run_id" then run_canonical = flat[j + 1] end
        end
        if run then note_unindexed_run(K, prefix, run_canonical) end
      end
      for _, suffix in ipairs(ix) do
        local by_value = by_value_suffix(suffix)
        if by_value then  -- the target's entry
          index_thread(K, by_value, id, ttl)
        else
          local index = K.metadata_index(suffix)
          local created = redis.call("EXISTS", index) == 0
          redis.call("ZADD", index, 0, K.member(ns, id))
          keep_alive(index, ttl, created)
        end
      end
      write_record(key, with_ix(flat, ix))
    end
    expire(key, ttl)
    if kind == "c" then note_deadline(K, ns, id, ttl) end  -- (include/ledger.lua)
    local index = (kind == "c") and K.index(ns) or K.writes_index(ns)
    local index_created = redis.call("EXISTS", index) == 0
    if kind == "c" then
      redis.call("ZADD", index, 0, id)
      written = written + 1
    else
      redis.call("SADD", index, id)
    end
    keep_alive(index, ttl, index_created)
    redis.call("SADD", root, ns)
    i = i + 4 + 2 * count
  end
end
keep_alive(root, ttl, root_created)
return written
