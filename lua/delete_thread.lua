#!lua flags=allow-oom
--[[
  delete_thread: remove every key of one thread. The thread is gone at once: its root (and
  runs set) is renamed into a new job of the gc root, so readers find nothing and writers wait;
  its keys are then unlinked in bounded steps (this call does the first, reap_thread.lua the
  rest): checkpoints, writes (also those of no checkpoint), every blob of the blob index and
  of the checkpoints, indexes, run indexes, entries in the global metadata indexes.

  KEYS[1]  P:th:{T}         thread root (SET of namespaces)
  KEYS[2]  P:runs:{T}       run ids of the thread
  KEYS[3]  P:gc:{T}         gc root

  ARGV[1]  prefix P   ARGV[2]  hash tag {T}   ARGV[3]  budget of this call (see reap_thread)

  Counts: KEYS 3; ARGV 3
  Built by: core/calls.py delete_thread()
  Reply: the number of jobs still pending (0: everything is gone)
]]
-- requires: keyschema, jobs, reap

local prefix, tag = ARGV[1], ARGV[2]
local K = keyspace(prefix, tag)
local has_root, has_runs = redis.call("EXISTS", KEYS[1]) == 1, redis.call("EXISTS", KEYS[2]) == 1
if not has_root and redis.call("EXISTS", KEYS[3]) == 0
    and redis.call("EXISTS", K.index(""), K.writes_index(""), K.ledger("")) > 0 then
  -- the root was evicted (a read says so: include/records.lua's lost()), not moved by a
  -- delete: what it led to of the graph's own namespace is reaped as if it had named it
  redis.call("SADD", KEYS[1], "")
  has_root = true
end
local has_values = redis.call("EXISTS", K.values) == 1
if has_root or has_runs or has_values then  -- runs may outlive the root's last namespace (expiry)
  local G = jobspace(prefix, tag, new_job(KEYS[3], "del"))
  if has_root then redis.call("RENAME", KEYS[1], G.part("th")) end
  if has_runs then redis.call("RENAME", KEYS[2], G.part("runs")) end
  if has_values then redis.call("RENAME", K.values, G.part("tv")) end
end
-- (a cluster's: the incarnation goes at once, so a writer of the thread starts a new one)
redis.call("UNLINK", K.ttl, K.bounds)
return reap(prefix, tag, tonumber(ARGV[3]))
