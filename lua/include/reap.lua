-- Whole-thread work in bounded steps; inlined where a script says `-- @include reap` (after
-- keyschema, drop and delta).
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

-- Take up to `count` members of a set and remove them from it (SRANDMEMBER + SREM: the
-- commands the ACL list already has).
local function take(set, count)
  local members = redis.call("SRANDMEMBER", set, count)
  if #members > 0 then redis.call("SREM", set, unpack(members)) end
  return members
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
  redis.call("UNLINK", index, K.writes_index(ns), bi)
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

-- prune (keep_latest), one namespace: swap in a fresh index holding only what stays (the
-- latest checkpoint and the ancestors its delta channels read), so readers see the pruned
-- namespace at once; the old indexes become the job's and are reaped in steps. Checkpoints
-- whose record cannot be read stay (see drop_checkpoint): the latest is the newest readable
-- one, and those newer than it stay with it.
local function prune_swap(K, prefix, tag, G, ns)
  local index, wi, bi = K.index(ns), K.writes_index(ns), K.loose_blobs(ns)
  local latest  -- the newest entry whose checkpoint is there (dangling entries may lead)
  local unreadable = {}
  local seen, upper = 0, "+"
  while not latest and seen < 5000 do  -- about 2 ms at most
    local ids = redis.call("ZREVRANGEBYLEX", index, upper, "-", "LIMIT", 0, 500)
    if #ids == 0 then break end
    for _, id in ipairs(ids) do
      local cp = K.checkpoint(ns, id)
      if redis.call("EXISTS", cp) == 1 then
        if readable_record_fields(cp, "p") then
          latest = id
          break
        end
        unreadable[#unreadable + 1] = id
      end
    end
    seen = seen + #ids
    upper = "(" .. ids[#ids]
  end
  if not latest and seen >= 5000 then
    return 10 + seen  -- not found yet: keep the namespace as it is rather than guess
  end
  local keep = unreadable
  if latest then
    keep[#keep + 1] = latest
    for _, id in ipairs(delta_dependencies(K, ns, latest)) do keep[#keep + 1] = id end
  end
  local left = redis.call("PTTL", index)
  if redis.call("EXISTS", index) == 1 then redis.call("RENAME", index, G.ns_part("i", ns)) end
  if redis.call("EXISTS", wi) == 1 then redis.call("RENAME", wi, G.ns_part("w", ns)) end
  -- loose blobs go with the old indexes: whatever no kept checkpoint references goes
  if redis.call("EXISTS", bi) == 1 then redis.call("RENAME", bi, G.ns_part("b", ns)) end
  for _, id in ipairs(keep) do
    redis.call("ZADD", index, 0, id)
    if redis.call("EXISTS", K.writes(ns, id)) == 1 then redis.call("SADD", wi, id) end
    local fields = readable_record_fields(K.checkpoint(ns, id), "bv")
    add_members(G.ns_part("k", ns), split_refs(fields and fields[1]))
  end
  for _, key in ipairs({ index, wi }) do copy_expiry(left, key) end
  redis.call("SADD", G.part("reap"), ns)
  return 10 + 5 * #keep
end

-- prune, one namespace after its swap: what the old indexes list and the new ones do not.
local function prune_reap(K, prefix, tag, G, ns, budget)
  local index = K.index(ns)
  local old_i, old_w, old_b = G.ns_part("i", ns), G.ns_part("w", ns), G.ns_part("b", ns)
  local kept, dropped = G.ns_part("k", ns), G.ns_part("c", ns)
  local used = 0
  while used < budget do
    local ids = redis.call("ZRANGE", old_i, 0, 199)
    if #ids == 0 then break end
    for _, id in ipairs(ids) do
      if not redis.call("ZSCORE", index, id) then
        local refs = {}
        if not drop_checkpoint(K, ns, id, refs) then  -- unreadable: it stays, with its writes
          redis.call("ZADD", index, 0, id)
          if redis.call("EXISTS", K.writes(ns, id)) == 1 then
            redis.call("SADD", K.writes_index(ns), id)
          end
        end
        for ref in pairs(refs) do redis.call("SADD", dropped, ref) end  -- candidates
        used = used + 8
      end
      used = used + 1
    end
    redis.call("ZREM", old_i, unpack(ids))
  end
  while used < budget do  -- writes of checkpoints that are gone or never were (orphans)
    local ids = take(old_w, 200)
    if #ids == 0 then break end
    for _, id in ipairs(ids) do
      if not redis.call("ZSCORE", index, id) then
        redis.call("UNLINK", K.writes(ns, id))
        redis.call("SREM", K.writes_index(ns), id)
      end
    end
    used = used + 2 * #ids + 2
  end
  while used < budget do  -- blobs no kept checkpoint references
    local refs = take(dropped, 500)
    if #refs == 0 then break end
    -- how long the kept checkpoints live: the longest of them (-1: one never expires)
    local kept_left = 0
    for _, id in ipairs(redis.call("ZRANGE", index, 0, 99)) do
      kept_left = longer(kept_left, redis.call("PTTL", K.checkpoint(ns, id)))
    end
    local again, lefts = {}, {}
    for _, ref in ipairs(refs) do
      if redis.call("SISMEMBER", kept, ref) == 0 then
        redis.call("UNLINK", K.blob(ns, ref))
      else
        -- kept, but renewed by a dropped checkpoint past what the kept ones live: loose
        local left = redis.call("PTTL", K.blob(ns, ref))
        if kept_left >= 0 and (left == -1 or left > kept_left) then
          again[#again + 1] = ref
          lefts[#lefts + 1] = left
        end
      end
    end
    add_loose(K, ns, again, lefts)
    used = used + 3 * #refs + 3
  end
  while used < budget do
    -- the loose blobs: those no kept checkpoint references go; the others stay loose, as
    -- they may outlive the kept checkpoints (written without a ttl, or with a longer one)
    local refs = take(old_b, 500)
    if #refs == 0 then break end
    local again, lefts = {}, {}
    for _, ref in ipairs(refs) do
      if redis.call("SISMEMBER", kept, ref) == 0 then
        redis.call("UNLINK", K.blob(ns, ref))
      else
        local left = redis.call("PTTL", K.blob(ns, ref))
        if left ~= -2 then
          again[#again + 1] = ref
          lefts[#lefts + 1] = left
        end
      end
    end
    add_loose(K, ns, again, lefts)
    used = used + 3 * #refs + 2
  end
  if used >= budget then return used, false end
  redis.call("UNLINK", kept)
  forget_empty_namespace(K, ns)
  return used + 2, true
end

local function reap_prune(K, prefix, tag, G, budget)
  local used = 0
  -- every swap first: the whole thread looks pruned as early as possible
  while used < budget do
    local ns = redis.call("SRANDMEMBER", G.part("todo"))
    if not ns then break end
    used = used + prune_swap(K, prefix, tag, G, ns)
    redis.call("SREM", G.part("todo"), ns)
  end
  while used < budget do
    local ns = redis.call("SRANDMEMBER", G.part("reap"))
    if not ns then break end
    local spent, done = prune_reap(K, prefix, tag, G, ns, budget - used)
    used = used + spent + 1
    if done then redis.call("SREM", G.part("reap"), ns) end
  end
  return used, used < budget
end

-- delete_for_runs: (1) collect the runs' checkpoints into per-namespace doomed sets (d:N);
-- (2) walk each such namespace once, sparing the ancestors that a remaining checkpoint
-- rebuilds its delta channels from and noting every blob a remaining checkpoint references
-- (l:N); (3) drop the doomed checkpoints and the blobs only they referenced. Nothing is
-- removed before the walk is over, so a spared checkpoint never disappears.
local function spare(K, ns, G, first)
  local doomed, live = G.ns_part("d", ns), G.ns_part("l", ns)
  local queue, head, used = { first }, 1, 0
  while head <= #queue do
    for _, dep in ipairs(delta_dependencies(K, ns, queue[head])) do
      used = used + 4
      if redis.call("SREM", doomed, dep) == 1 then
        local fields = readable_record_fields(K.checkpoint(ns, dep), "bv")
        add_members(live, split_refs(fields and fields[1]))
        queue[#queue + 1] = dep
      end
    end
    head = head + 1
  end
  return used
end

local function reap_runs(K, prefix, tag, G, budget)
  local used = 0
  local phase, cursor, current = load_progress(G, "collect", "0")
  while used < budget and phase == "collect" do
    local run = current or redis.call("SRANDMEMBER", G.part("runs"))
    if not run then
      phase, cursor = "walk", ""
      break
    end
    current = run
    local reply = redis.call("SSCAN", K.run(run), cursor, "COUNT", 500)
    for _, member in ipairs(reply[2]) do
      local sep = string.find(member, ":", 1, true)
      local ns, id = string.sub(member, 1, sep - 1), string.sub(member, sep + 1)
      -- an entry whose record now names another run is stale (a record replaced by an
      -- earlier version's copy kept it): the checkpoint is not this run's
      local cp = K.checkpoint(ns, id)
      local fields = readable_record_fields(cp, "r")  -- (unreadable: taken as the run's)
      if fields and fields[1] ~= run and redis.call("EXISTS", cp) == 1 then
        redis.call("SREM", K.run(run), member)
      else
        redis.call("SADD", G.ns_part("d", ns), id)
        redis.call("SADD", G.part("ns"), ns)
        redis.call("SADD", G.part("walk"), ns)
      end
    end
    used = used + 5 * #reply[2] + 2
    cursor = reply[1]
    if cursor == "0" then
      redis.call("SREM", G.part("runs"), run)
      current = false
    end
  end
  while used < budget and phase == "walk" do
    local ns = current or redis.call("SRANDMEMBER", G.part("walk"))
    if not ns then
      phase = "drop"
      break
    end
    current = ns
    local doomed, live = G.ns_part("d", ns), G.ns_part("l", ns)
    local lower = (cursor == "") and "-" or ("(" .. cursor)
    local ids = redis.call("ZRANGE", K.index(ns), lower, "+", "BYLEX", "LIMIT", 0, 200)
    for _, id in ipairs(ids) do
      if redis.call("SISMEMBER", doomed, id) == 0 then
        -- (unreadable: its blobs and parent unknown; it stays, see drop_checkpoint)
        local fields = readable_record_fields(K.checkpoint(ns, id), "p", "bv") or {}
        add_members(live, split_refs(fields[2]))
        if fields[1] and redis.call("SISMEMBER", doomed, fields[1]) == 1 then
          used = used + spare(K, ns, G, id)
        end
        used = used + 3
      end
      used = used + 1
    end
    if #ids < 200 then
      redis.call("SREM", G.part("walk"), ns)
      current, cursor = false, ""
    else
      cursor = ids[#ids]
    end
  end
  while used < budget and phase == "drop" do
    local ns = redis.call("SRANDMEMBER", G.part("ns"))
    if not ns then
      phase = "done"
      break
    end
    local live, bi = G.ns_part("l", ns), K.loose_blobs(ns)
    local ids = take(G.ns_part("d", ns), 200)
    for _, id in ipairs(ids) do
      local refs = {}
      drop_checkpoint(K, ns, id, refs)
      for ref in pairs(refs) do
        if redis.call("SISMEMBER", live, ref) == 0 then
          redis.call("UNLINK", K.blob(ns, ref))
          redis.call("SREM", bi, ref)
        end
        used = used + 2
      end
      used = used + 8
    end
    if #ids < 200 then
      forget_empty_namespace(K, ns)
      redis.call("UNLINK", live)
      redis.call("SREM", G.part("ns"), ns)
    end
  end
  if phase == "done" then return used, true end
  save_progress(G, phase, cursor, current)
  return used, false
end

-- set_thread_ttl: every key of the thread gets the new expiry (0: none), namespace by
-- namespace (G todo, a copy of the root taken when the job began), a chunk at a time.
local function reap_ttl(K, prefix, tag, G, budget)
  local ttl = tonumber(redis.call("HGET", G.state, "ttl")) or 0
  local phase, cursor, current = load_progress(G, "i", "")
  local used = 0
  local seen = {}
  local function apply(key)
    if seen[key] then return end
    seen[key] = true
    used = used + 1
    if ttl > 0 then redis.call("EXPIRE", key, ttl) else redis.call("PERSIST", key) end
  end
  while used < budget and phase ~= "runs" do
    local ns = current or redis.call("SRANDMEMBER", G.part("todo"))
    if not ns then
      phase, cursor = "runs", "0"
      break
    end
    current = ns
    local bi = K.loose_blobs(ns)
    if phase == "i" then
      local lower = (cursor == "") and "-" or ("(" .. cursor)
      local ids = redis.call("ZRANGE", K.index(ns), lower, "+", "BYLEX", "LIMIT", 0, 200)
      for _, id in ipairs(ids) do
        local cp = K.checkpoint(ns, id)
        -- (unreadable: its own keys get the expiry; its blobs and indexes are unknown)
        local fields = readable_record_fields(cp, "bv", "ix") or {}
        apply(cp)
        apply(K.writes(ns, id))
        for _, ref in ipairs(split_refs(fields[1])) do apply(K.blob(ns, ref)) end
        for _, suffix in ipairs(split_refs(fields[2])) do
          local by_value = by_value_suffix(suffix)
          local index = by_value and K.threads_with(by_value) or K.metadata_index(suffix)
          if not seen[index] then
            seen[index] = true
            local own = ttl == 0 and -1 or ttl * 1000
            if by_value then
              used = used + settle_threads_index(K, index, own)
            else
              used = used + settle_metadata_index(prefix, tag, index, own)
            end
          end
        end
        used = used + 2
      end
      if #ids < 200 then phase, cursor = "w", "0" else cursor = ids[#ids] end
    else
      local set = (phase == "w") and K.writes_index(ns) or bi
      local reply = redis.call("SSCAN", set, cursor, "COUNT", 500)
      for _, member in ipairs(reply[2]) do
        apply((phase == "w") and K.writes(ns, member) or K.blob(ns, member))
      end
      used = used + 2
      cursor = reply[1]
      if cursor == "0" then
        if phase == "w" then
          phase = "b"
        else
          apply(K.index(ns))
          apply(K.writes_index(ns))
          apply(bi)
          redis.call("SREM", G.part("todo"), ns)
          phase, cursor, current = "i", "", false
        end
      end
    end
  end
  while used < budget and phase == "runs" do
    local reply = redis.call("SSCAN", K.runs, cursor, "COUNT", 500)
    for _, run in ipairs(reply[2]) do apply(K.run(run)) end
    used = used + 2
    cursor = reply[1]
    if cursor == "0" then
      apply(K.runs)
      apply(K.thread)
      apply(K.values)
      apply(K.bounds)
      return used, true
    end
  end
  save_progress(G, phase, cursor, current)
  return used, false
end

-- One step of the thread's jobs, oldest first, within `budget`. Returns the number of jobs
-- still pending (0: the gc root is gone). `only` (optional): a job, reaped alone while it is
-- the oldest and its state holds `token` (0 once it is not).
local function reap(prefix, tag, budget, only, token)
  local K = keyspace(prefix, tag)
  local used = 0
  while used < budget do
    local jobs = redis.call("SMEMBERS", K.gc)
    if #jobs == 0 then return 0 end
    local job, n = nil, nil
    for _, j in ipairs(jobs) do
      local k = tonumber(string.match(j, ":(%d+)$"))
      if not n or k < n then job, n = j, k end
    end
    local kind = string.match(job, "^(%a+):")
    local G = jobspace(prefix, tag, n)
    if only and (job ~= only or redis.call("HGET", G.state, "tok") ~= token) then return 0 end
    -- a copy being discarded is marked at once: its chunks and publish are refused from the
    -- first step on, not only once the job is gone (a step unlinks part of it)
    if kind == "copy" then redis.call("HSET", G.state, "x", "1") end
    local spent, done
    if kind == "del" or kind == "copy" then
      spent, done = reap_whole(K, prefix, tag, G, budget - used, kind)
    elseif kind == "prune" then
      spent, done = reap_prune(K, prefix, tag, G, budget - used)
    elseif kind == "runs" then
      spent, done = reap_runs(K, prefix, tag, G, budget - used)
    elseif kind == "ttl" then
      spent, done = reap_ttl(K, prefix, tag, G, budget - used)
    else
      spent, done = 0, true  -- unknown: written by a newer version; nothing to do here
    end
    used = used + spent + 2
    if not done then return #jobs end
    -- the job's containers are empty by now (or hold nothing of value): drop them
    for _, part in ipairs({ "th", "runs", "tv", "todo", "reap", "ns", "walk" }) do
      redis.call("UNLINK", G.part(part))
    end
    redis.call("UNLINK", G.state)
    redis.call("SREM", K.gc, job)
  end
  return redis.call("SCARD", K.gc)
end
