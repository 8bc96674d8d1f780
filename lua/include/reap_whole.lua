-- requires: refs, record, indexes, jobs
-- The del and copy jobs (see jobs.lua): a thread that goes whole.

-- Remove the keys of one checkpoint of a thread that goes whole (the run indexes go whole
-- too, so they are not updated); its blob refs join the namespace's loose blobs, which are
-- unlinked after the checkpoints. A record that cannot be read goes too: the job then finds
-- the blobs only it referenced by their key pattern (reap_unread_blobs).
local function unlink_checkpoint(K, G, bi, ns, id)
  local cp = K.checkpoint(ns, id)
  local fields = readable_record_fields(cp, "bv", "ix")
  if not fields then
    redis.call("HSETNX", G.state, "scan", "0")
    redis.call("UNLINK", cp, K.writes(ns, id))
    return 4
  end
  local refs = split_refs(fields[1])
  add_members(bi, refs)
  unindex_checkpoint(K, ns, id, fields[2])
  redis.call("UNLINK", cp, K.writes(ns, id))
  return 4 + #refs
end

-- A thread that goes whole leaves the threads-by-value indexes it is listed in (`values`: its
-- K.values, or a delete job's copy of it); an index that was persistent for its sake may
-- then expire with the threads left in it. Returns the work done and whether all are left.
local function leave_threads_indexes(K, values, budget)
  local used = 0
  while used < budget do
    local suffixes = take(values, 50)
    if #suffixes == 0 then return used, true end
    for _, suffix in ipairs(suffixes) do used = used + leave_threads_index(K, suffix) end
    used = used + 2
  end
  return used, false
end

-- Unlink every key of namespace ns, a chunk at a time. Returns the work done and whether the
-- namespace is gone.
local function reap_namespace(K, G, ns, budget)
  local used = 0
  local index, bi = K.index(ns), K.loose_blobs(ns)
  while used < budget do
    local ids = redis.call("ZRANGE", index, 0, 199)
    if #ids == 0 then break end
    for _, id in ipairs(ids) do used = used + unlink_checkpoint(K, G, bi, ns, id) end
    redis.call("ZREM", index, unpack(ids))
    redis.call("HDEL", K.ledger(ns), unpack(ids))
  end
  -- records the ledger still names without an index entry (the index was evicted, or the
  -- root and the index: include/ledger.lua's missing_root)
  while used < budget do
    local ids = redis.call("HRANDFIELD", K.ledger(ns), 200)
    if not ids or #ids == 0 then break end  -- (fakeredis: nil for a missing key)
    for _, id in ipairs(ids) do
      if redis.call("EXISTS", K.checkpoint(ns, id)) == 1 then
        used = used + unlink_checkpoint(K, G, bi, ns, id)
      else
        used = used + 1
      end
    end
    redis.call("HDEL", K.ledger(ns), unpack(ids))
  end
  while used < budget do  -- writes hashes, also those of no checkpoint
    local ids = take(K.writes_index(ns), 200)
    if #ids == 0 then break end
    for _, id in ipairs(ids) do redis.call("UNLINK", K.writes(ns, id)) end
    used = used + #ids + 2
  end
  while used < budget do  -- every blob: those the checkpoints referenced, and loose ones
    local refs = take(bi, 500)
    if #refs == 0 then break end
    for _, ref in ipairs(refs) do redis.call("UNLINK", K.blob(ns, ref)) end
    used = used + #refs + 2
  end
  if used >= budget then return used, false end
  redis.call("UNLINK", index, K.writes_index(ns), bi, K.ledger(ns))
  return used + 1, true
end

-- A delete that met a record it could not read (unlink_checkpoint) does not know the blobs
-- only that record referenced: it unlinks every blob of the thread left, found by their key
-- pattern, a SCAN of the keyspace in steps (the cursor in G scan). Only a delete: nothing
-- writes to the thread while it is pending, and every blob of the thread is to go (a copy's
-- job may be in a target that has blobs of its own). Returns the work done and whether the
-- scan is over.
local function reap_unread_blobs(K, G, budget)
  local cursor = redis.call("HGET", G.state, "scan")
  if not cursor then return 0, true end
  local pattern = string.gsub(K.blob("", ""), "[%*%?%[%]\\]", "\\%0")
  pattern = string.sub(pattern, 1, -2) .. "*"  -- (K.blob("", ""): P:blob:{T}::)
  local used = 0
  while used < budget do
    local reply = redis.call("SCAN", cursor, "MATCH", pattern, "COUNT", 1000)
    for _, key in ipairs(reply[2]) do redis.call("UNLINK", key) end
    -- (a step examines about 1,000 keys and writes none: a call of budget 1,000 took 18 ms at
    -- most in a store of 200,000 keys, on Redis 7)
    used = used + 100 + #reply[2]
    cursor = reply[1]
    if cursor == "0" then return used, true end
  end
  redis.call("HSET", G.state, "scan", cursor)
  return used, false
end

-- del / copy: a renamed thread root (G th) and runs set (G runs); the namespace keys keep
-- their names (nothing can reach them: readers need the root, writers wait for the gc root).
local function reap_whole(K, prefix, tag, G, budget, kind)
  local used = 0
  while used < budget do
    local ns = redis.call("SRANDMEMBER", G.part("th"))
    if not ns then break end
    local spent, done = reap_namespace(K, G, ns, budget - used)
    used = used + spent + 1
    if done then redis.call("SREM", G.part("th"), ns) end
  end
  while used < budget do
    local runs = take(G.part("runs"), 200)
    if #runs == 0 then break end
    for _, run in ipairs(runs) do redis.call("UNLINK", K.run(run)) end  -- lazy-freed when big
    used = used + #runs + 2
  end
  -- (a delete renamed K.values away; a discarded copy wrote its target's own)
  for _, values in ipairs({ G.part("tv"), K.values }) do
    if used < budget then
      local spent = leave_threads_indexes(K, values, budget - used)
      used = used + spent
    end
  end
  if kind == "del" and used < budget then  -- (everything else is done)
    local spent, done = reap_unread_blobs(K, G, budget - used)
    return used + spent, done
  end
  return used, used < budget
end
