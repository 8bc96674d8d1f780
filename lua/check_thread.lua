#!lua flags=no-writes
--[[
  check_thread: report every broken link among one thread's keys (read only), a bounded chunk
  per call. Used by the invariant checker, which also compares the keys reachable from the
  indexes with the keys a SCAN finds, to report keys that no index leads to.

  KEYS[1]  P:th:{T}         thread root (SET of namespaces)
  KEYS[2]  P:runs:{T}       run ids of the thread

  ARGV[1]  prefix P   ARGV[2]  hash tag {T}
  ARGV[3]  "ns": walk the namespaces | "runs": walk the run indexes
  ARGV[4..7]  the cursor ("0", "0", "", "" to start; see include/walk.lua, whose rc is the
           SSCAN cursor of the runs set for "runs")
  ARGV[8]  budget: stop after about this many keys examined
  ARGV[9]  "1" on a cluster whose threads-by-value lists are complete: each checkpoint's
           values must be covered by the thread's bounds (K.bounds, include/lists.lua)
  or ARGV[3] "ttl", then keys of the thread (ARGV[4..]): the reply is their PTTLs, in order
  (for keys no index leads to: with an expiry they go by themselves)

  Counts: KEYS 2; ARGV 3..
  Built by: core/calls.py check_thread()
  Reply: { {problem, key, ...}, {reachable key, ...}, cursor | nil } where a problem is one of
    "namespace without index", "index entry without checkpoint",
    "checkpoint without blob", "writes index entry without writes",
    "writes without checkpoint" (writes without expiry of a checkpoint not in the index),
    "run without run index",
    "run index entry without checkpoint", "checkpoint without its metadata index entry",
    "thread missing from a threads-by-value index", "threads-by-value index scores the
    thread below a checkpoint", "threads-by-value index missing from the thread's values",
    "checkpoint not covered by its thread's list bounds", "thread's newest score in a list
    below a checkpoint", "unreadable record" (a record the scripts cannot parse: its blobs
    and index entries are not checked)
  and the cursor (4 strings) goes on, nil when this walk is done.
]]
-- requires: keyschema, refs, record, indexes, walk, lists

if ARGV[3] == "ttl" then
  local left = {}
  for i = 4, #ARGV do left[#left + 1] = redis.call("PTTL", ARGV[i]) end
  return left
end

local prefix, tag = ARGV[1], ARGV[2]
local K = keyspace(prefix, tag)
local budget = tonumber(ARGV[8])
local lists_ready = ARGV[9] == "1"
local cursor = { ARGV[4], ARGV[5], ARGV[6], ARGV[7] }
local problems, reachable, seen, used = {}, {}, {}, 0
local function report(problem, key)
  problems[#problems + 1] = problem
  problems[#problems + 1] = key
end
local function reach(key)
  if seen[key] == nil then
    used = used + 1
    seen[key] = redis.call("EXISTS", key) == 1
    if seen[key] then reachable[#reachable + 1] = key end
  end
  return seen[key]
end

local loose_blobs = K.loose_blobs

-- one namespace; `at` is "" (start), "i<id>" (checkpoints after id), "w<n>" / "b<n>" (SSCAN
-- cursor n of the writes index / the loose blobs)
local function visit(ns, at)
  if used >= budget then return at end
  local index = K.index(ns)
  if at == "" then
    local has_index, has_writes = reach(index), reach(K.writes_index(ns))
    reach(loose_blobs(ns))
    reach(K.ledger(ns))  -- (its entries: include/ledger.lua)
    if not has_index and not has_writes then report("namespace without index", index) end
    at = "i"
  end
  while used < budget do
    local phase, pos = string.sub(at, 1, 1), string.sub(at, 2)
    if phase == "i" then
      local lower = (pos == "") and "-" or ("(" .. pos)
      local ids = redis.call("ZRANGE", index, lower, "+", "BYLEX", "LIMIT", 0, 100)
      for _, id in ipairs(ids) do
        local cp = K.checkpoint(ns, id)
        -- the whole record is parsed: a record cut short in its last field is unreadable too
        local readable, rec = true, nil
        if reach(cp) then readable, rec = pcall(record, cp) end
        if not readable then
          report("unreadable record", cp)
        elseif rec then
          local fields = { rec.bv or false, rec.ix or false }
          local refs, listed = split_refs(fields[1]), {}
          for _, ref in ipairs(refs) do listed[ref] = true end
          for _, ref in ipairs(refs) do
            local blob = K.blob(ns, ref)
            if not reach(blob) then
              report("checkpoint without blob", blob)
            else
              local base = stored_base(blob)
              if base and not listed[base] then
                report("checkpoint without the base of a blob", cp)
              elseif base and stored_base(K.blob(ns, base)) then
                report("blob compressed against a compressed one", blob)
              end
            end
          end
          for _, suffix in ipairs(split_refs(fields[2])) do
            local by_value = by_value_suffix(suffix)
            if by_value then
              local score = redis.call("ZSCORE", K.threads_with(by_value), tag)
              if not score then
                report("thread missing from a threads-by-value index", cp)
              elseif tonumber(score) < id_score(id) then
                report("threads-by-value index scores the thread below a checkpoint", cp)
              end
              if redis.call("SISMEMBER", K.values, by_value) == 0 then
                report("threads-by-value index missing from the thread's values", cp)
              end
            elseif not redis.call("ZSCORE", K.metadata_index(suffix), K.member(ns, id)) then
              report("checkpoint without its metadata index entry", cp)
            end
          end
          if lists_ready then  -- a cluster's lists hold the thread (include/lists.lua)
            local needs = {}
            for name, value in pairs(rec) do
              if name ~= "r" then add_list_needs(needs, name, value, id) end  -- (runs: see
            end                                          -- forget_old_runs; checked by the client)
            for suffix, score in pairs(needs) do
              local got = redis.call("HMGET", K.bounds, suffix, "@" .. suffix)
              if not got[1] or parse_score(got[1]) < score then
                report("checkpoint not covered by its thread's list bounds", cp)
              elseif not got[2] or parse_score(got[2]) < score then
                report("thread's newest score in a list below a checkpoint", cp)
              end
            end
          end
        else
          report("index entry without checkpoint", cp)
        end
        reach(K.writes(ns, id))
      end
      at = (#ids < 100) and "w0" or ("i" .. ids[#ids])
    else
      local set = (phase == "w") and K.writes_index(ns) or loose_blobs(ns)
      local reply = redis.call("SSCAN", set, pos, "COUNT", 100)
      for _, member in ipairs(reply[2]) do
        if phase == "w" then
          local writes = K.writes(ns, member)
          if not reach(writes) then
            report("writes index entry without writes", writes)
          elseif not redis.call("ZSCORE", index, member)
              and redis.call("PTTL", writes) == -1 then
            -- (with an expiry they go by themselves: a checkpoint expires before its writes)
            report("writes without checkpoint", writes)
          end
        else
          reach(K.blob(ns, member))
        end
      end
      used = used + 1
      if reply[1] ~= "0" then
        at = phase .. reply[1]
      elseif phase == "w" then
        at = "b0"
      else
        return nil
      end
    end
  end
  return at
end

-- the run indexes: rc is the SSCAN cursor of the runs set, ns the run being checked, at the
-- SSCAN cursor of its run index
local function walk_runs()
  local rc, on, run, at = cursor[1], cursor[2] == "1", cursor[3], cursor[4]
  while used < budget do
    if not on then
      if rc == "done" then return nil end
      local reply = redis.call("SSCAN", KEYS[2], rc, "COUNT", 100)
      for _, r in ipairs(reply[2]) do
        if not reach(K.run(r)) then report("run without run index", K.run(r)) end
      end
      used = used + #reply[2]
      rc = (reply[1] == "0") and "done" or reply[1]
      -- the members of each run index of this batch, one run at a time
      local pending = {}
      for _, r in ipairs(reply[2]) do
        if seen[K.run(r)] then pending[#pending + 1] = r end
      end
      if #pending > 0 then
        -- resume at the first; the others of the batch are checked by later calls
        on, run, at = true, table.concat(pending, ","), "0"
      end
    else
      local first, rest = string.match(run, "^([^,]*),?(.*)$")
      local reply = redis.call("SSCAN", K.run(first), at, "COUNT", 200)
      for _, member in ipairs(reply[2]) do
        local sep = string.find(member, ":", 1, true)
        local cp = K.checkpoint(string.sub(member, 1, sep - 1), string.sub(member, sep + 1))
        used = used + 1
        if redis.call("EXISTS", cp) == 0 then report("run index entry without checkpoint", cp) end
      end
      if reply[1] ~= "0" then
        at = reply[1]
      elseif rest ~= "" then
        run, at = rest, "0"
      else
        on, run, at = false, "", ""
      end
    end
  end
  return { rc, on and "1" or "0", run, at }
end

local next_cursor
if ARGV[3] == "ns" then
  if cursor[1] == "0" and cursor[2] == "0" then
    reach(KEYS[1])
    reach(KEYS[2])
    reach(K.ttl)
    reach(K.values)
    reach(K.bounds)
  end
  next_cursor = walk_namespaces(KEYS[1], cursor, visit)
else
  next_cursor = walk_runs()
end
return { problems, reachable, next_cursor or false }
