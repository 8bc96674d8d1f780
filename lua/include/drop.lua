-- requires: refs, record, indexes, ledger
-- Removing checkpoints.

-- Remove one checkpoint with its writes and every index entry that points at it. Adds the
-- refs of the blobs it used to `refs` (a set); whether a blob can go is decided by gc_blobs,
-- because other checkpoints of the namespace may share it. A checkpoint whose record cannot
-- be read stays as it is (false): its blob refs and index entries are unknown, and removing
-- it would leave them where nothing finds them again; a delete of the thread removes it.
local function drop_checkpoint(K, ns, id, refs)
  local cp = K.checkpoint(ns, id)
  local fields = readable_record_fields(cp, "bv", "r", "ix")
  if not fields then return false end
  for _, ref in ipairs(split_refs(fields[1])) do refs[ref] = true end
  unindex_checkpoint(K, ns, id, fields[3])
  if fields[2] then unindex_run(K, K.runs, fields[2], ns, id) end
  redis.call("UNLINK", cp, K.writes(ns, id))
  redis.call("SREM", K.writes_index(ns), id)
  redis.call("ZREM", K.index(ns), id)
  drop_entry(K, ns, id)
  return true
end

-- Unlink the candidate blobs of a namespace that no remaining checkpoint references.
local function gc_blobs(K, ns, candidates)
  if next(candidates) == nil then return end
  for _, id in ipairs(redis.call("ZRANGE", K.index(ns), 0, -1)) do
    local bv = record_field(K.checkpoint(ns, id), "bv")
    for _, ref in ipairs(split_refs(bv)) do candidates[ref] = nil end
  end
  for ref in pairs(candidates) do redis.call("UNLINK", K.blob(ns, ref)) end
end

-- Forget a namespace in the thread index once it holds neither checkpoints nor writes.
-- `keep_ledger`: its last entries expired, or went with runs deleted (not with the thread):
-- the graph's namespace's ledger stays while it expires (include/ledger.lua's drop_entry).
local function forget_empty_namespace(K, ns, keep_ledger)
  if redis.call("EXISTS", K.index(ns), K.writes_index(ns)) == 0 then
    redis.call("SREM", K.thread, ns)
    -- (entries of no checkpoint left; but the graph's namespace's ledger, when its entries
    -- expired and it expires, stays as long as the thread's deadline in the registry of
    -- live threads: include/ledger.lua's drop_entry)
    if not (keep_ledger and ns == "" and redis.call("PTTL", K.ledger(ns)) > 0) then
      redis.call("UNLINK", K.ledger(ns))
    end
    -- no checkpoint is left to reference its loose blobs: they go with it
    local loose = K.loose_blobs(ns)
    for _, ref in ipairs(redis.call("SMEMBERS", loose)) do redis.call("UNLINK", K.blob(ns, ref)) end
    redis.call("UNLINK", loose)
    if redis.call("EXISTS", K.thread) == 0 then
      -- that was the thread's last namespace: its run indexes lead nowhere any more
      for _, run in ipairs(redis.call("SMEMBERS", K.runs)) do redis.call("UNLINK", K.run(run)) end
      redis.call("UNLINK", K.runs)
      -- and it leaves the threads-by-value indexes (as a delete does: reap.lua)
      for _, suffix in ipairs(redis.call("SMEMBERS", K.values)) do leave_threads_index(K, suffix) end
      redis.call("UNLINK", K.values, K.bounds)  -- (K.bounds: a cluster's, include/lists.lua)
    end
  end
end
