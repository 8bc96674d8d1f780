#!lua flags=allow-oom
--[[
  get_tuple: one checkpoint (the latest of its namespace, or a given id) with its channel
  values and pending writes.

  KEYS[1]  P:idx:{T}:N      namespace index (ZSET of checkpoint ids)
  KEYS[2]  P:alive          the registry of live threads (include/registry.lua), on a
                            standalone server only: outside the thread's slot

  ARGV[1]  prefix P   ARGV[2]  hash tag {T}   ARGV[3]  namespace N (encoded)
  ARGV[4]  checkpoint id (raw), "" for the latest
  ARGV[5]  refresh on read: the saver's default ttl in seconds (the thread's own setting
           wins), or -1 to leave expiries alone
  ARGV[6]  h, the number of blobs the client holds (its bases of the namespace's channels),
           then h pairs: ref, the mark the blob was stored with ("u:b:<mark>;",
           src/langgraph/checkpoint/rediskv/compression.py)

  Counts: KEYS 1..2; ARGV 6+2n
  Built by: core/calls.py get_tuple()
  Reply: nil when there is no such checkpoint (or its thread's root P:th:{T} is gone, or
  keep_last hid it, or no key of the thread is left and the registry KEYS[2] does not hold
  it as due: new or expired); 0 when no key of the thread is left and there is no KEYS[2]
  (include/ledger.lua's missing_root: the client asks thread_deadlines.lua whether it was
  due); an error "LOST <key> <what>" when the thread lost a key it needs to the server's
  eviction (include/records.lua's lost()), "LOST P:th:{T} thread due <deadline>" when it lost
  every key while the registry holds it as due; else (include/records.lua's load_checkpoint)
    { ns, id, record, {ref, value, ...}, {field, write, ...}, parent id | nil, large }
  the record as stored (the client parses its large fields, md, ck and the pending writes,
  from byte `large` on), the values it references, and the writes of its writes hash. A
  value the client holds, stored with the mark it gave, comes back as "": its bytes are
  those the client has (a blob's mark is a digest of its bytes), and a chat's base, its
  whole history, is not copied again at every turn.
]]
-- requires: keyschema, expiry, records, drop, ledger

local K = keyspace(ARGV[1], ARGV[2])
local ns, id = ARGV[3], ARGV[4]

-- a thread exists while its root does: a delete hides it at once by moving the root away
if redis.call("EXISTS", K.thread) == 0 then
  local why = missing_root(K, ns)
  if why == "evicted" then return lost(K.thread, "thread root") end
  if why == "untraced" then return untraced(K, KEYS[2], nil) end
  return nil
end
local ttl = tonumber(ARGV[5])
if ttl >= 0 then ttl = thread_ttl(K, ttl) else ttl = 0 end
if id == "" then
  -- the newest entry whose checkpoint is there: entries of expired checkpoints may lead
  -- (written with a ttl after older ones written without), and are dropped as they are met
  for attempt = 1, 100 do
    local latest = redis.call("ZREVRANGE", KEYS[1], 0, 0)
    if #latest == 0 then
      if attempt == 1 and index_lost(K, ns) then return lost(KEYS[1], "checkpoint index") end
      return nil
    end
    id = latest[1]
    if redis.call("EXISTS", K.checkpoint(ns, id)) == 1 then break end
    -- missing while its ledger says it should be there: evicted, not expired
    if record_evicted(K, ns, id) then return lost(K.checkpoint(ns, id), "checkpoint record") end
    redis.call("ZREM", KEYS[1], id)
    drop_entry(K, ns, id)
    -- an index emptied so is forgotten with its namespace, not taken for one evicted later
    if redis.call("EXISTS", KEYS[1]) == 0 then forget_empty_namespace(K, ns, true) end
  end
elseif not redis.call("ZSCORE", KEYS[1], id) then
  return nil  -- not (or no longer) in the index: deleted, or pruned in steps
elseif redis.call("EXISTS", K.checkpoint(ns, id)) == 0 and record_evicted(K, ns, id) then
  return lost(K.checkpoint(ns, id), "checkpoint record")
end
local held = {}
for j = 7, 6 + 2 * tonumber(ARGV[6]), 2 do held[ARGV[j]] = ARGV[j + 1] end
local record, missing = load_checkpoint(K, ns, id, ttl, held)
if missing then return lost(missing, "value") end
if record and ttl > 0 then
  keep_alive(KEYS[1], ttl, false)
  keep_alive(K.thread, ttl, false)
  if redis.call("EXISTS", K.writes_index(ns)) == 1 then
    keep_alive(K.writes_index(ns), ttl, false)
  end
end
return record
