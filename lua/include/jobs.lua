-- requires:
-- Whole-thread work in bounded steps: the jobs core (a job's registration and progress).
-- One file per job kind (reap_whole, reap_prune, reap_runs, reap_ttl); reap.lua runs them.
--
-- A delete, prune, delete_for_runs, set_thread_ttl or copy of a thread is a *job*: the
-- operation's first script makes its change visible at once (delete renames the thread root
-- away, prune and delete_for_runs decide what stays before anything goes) and registers the
-- job in the thread's gc root; the rest is done by reap_thread.lua calls, each of which stops
-- after about `budget` units of work (one unit ~ one Redis command), so no call holds the
-- server for long. Jobs run one at a time in the order they were registered. Any client may
-- run the next step: the one that started the job, a writer of the thread (it finds the gc
-- root and reaps before it writes), delete_thread or check_invariants, so a job whose client
-- died midway is finished by whoever comes next.
--
-- The keys (built in keyschema.lua, listed in keys.py):
--   P:gc:{T}              SET   pending jobs "<kind>:<n>"; exists exactly while one is pending
--   P:gc:{T}:<n>          HASH  a job's progress (cursors), for the kinds that keep one
--   P:gc:{T}:<n>:<part>   the job's containers (a renamed thread root, old indexes ...)
--   P:lb:{T}:N            SET   loose blobs: refs "C:V" of namespace N that a replaced checkpoint
--                               referenced (a re-put id, a copy onto the same id), which no
--                               bv may lead to any more; with the bv fields, a delete finds
--                               every blob. Empty (absent) unless ids were replaced: no cost
--                               per checkpoint.
--
-- Kinds: del (delete_thread), copy (an unpublished copy_thread: discarded like a delete),
-- prune (keep_latest), runs (delete_for_runs), ttl (set_thread_ttl).

-- (the keys: K.loose_blobs and jobspace in keyschema.lua)

-- A job's progress: phase, cursor, and the namespace (or run) it is at, or false.
local function load_progress(G, phase, cursor)
  local f = redis.call("HMGET", G.state, "ph", "cur", "on", "ns")
  return f[1] or phase, f[2] or cursor, (f[3] == "1") and f[4]
end

local function save_progress(G, phase, cursor, current)
  redis.call("HSET", G.state, "ph", phase, "cur", cursor, "on", current and "1" or "0",
    "ns", current or "")
end

-- Register a job of `kind`; returns its number n (jobs run in the order of n).
local function new_job(gc, kind)
  local n = 0
  for _, job in ipairs(redis.call("SMEMBERS", gc)) do
    local k = tonumber(string.match(job, ":(%d+)$"))
    if k and k > n then n = k end
  end
  n = n + 1
  redis.call("SADD", gc, kind .. ":" .. n)
  return n
end

-- Keep an index key alive at least as long as `key` (its expiry copied: a swap must not make
-- a thread's index immortal, nor shorten it).
local function copy_expiry(from_left, key)
  if from_left > 0 then redis.call("EXPIRE", key, math.ceil(from_left / 1000)) end
end

-- Take up to `count` members of a set and remove them from it (SRANDMEMBER + SREM: the
-- commands the ACL list already has).
local function take(set, count)
  local members = redis.call("SRANDMEMBER", set, count)
  if #members > 0 then redis.call("SREM", set, unpack(members)) end
  return members
end
