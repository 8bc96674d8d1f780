-- requires: keyschema, refs, expiry, ledger
-- The global indexes a checkpoint is in (metadata indexes, threads-by-value indexes, the
-- threads with an unindexed run), the run and namespace indexes it leaves when it goes, and
-- keeping a checkpoint alive with every index that leads to it.

-- Which metadata values put their thread in a threads-by-value index, so that a global
-- filter on any key (not only the indexed ones) visits only the threads that may match:
-- JSON strings of at most 128 characters (user ids, assistant ids, tenants, LangGraph's
-- source: a value of every thread still answers a limit newest first), except for run_id,
-- which has a metadata index of its own by default, and LangGraph's step, a number anyway.
-- Numbers are left out: most are counters, which would list a thread under a value per
-- checkpoint. The same rule: core/rules.py's thread_indexed().
local THREAD_INDEX_SKIPS = { step = true, run_id = true }

local function thread_indexed(key, canonical)
  return not THREAD_INDEX_SKIPS[key] and string.byte(canonical, 1) == 34 and #canonical <= 130
end

-- A record's ix field lists the global indexes its checkpoint is in: "<suffix>" for a
-- metadata index (K.metadata_index), "/<suffix>" for a threads-by-value index
-- (K.threads_with; enc() never leaves a "/", so the two cannot be confused).
-- The suffix of an entry of a threads-by-value index, nil for a metadata index's.
local function by_value_suffix(entry)
  if string.byte(entry, 1) == 47 then return string.sub(entry, 2) end  -- "/"
  return nil
end

-- The ix entries a metadata value (key raw, canonical JSON) gives its checkpoint: that of the
-- metadata index when `registered[key]`, that of the threads-by-value index when
-- thread_indexed() takes it; nil for either it does not get. (put, copy and reindex alike.)
-- `suffix`: enc(key) .. ":" .. enc(canonical) when the caller has it (a put's client sends it).
local function metadata_entries(key, canonical, registered, suffix)
  local indexed = registered[key] and canonical ~= "null" and #canonical <= 256
  local by_value = thread_indexed(key, canonical)
  if not indexed and not by_value then return nil, nil end
  suffix = suffix or enc(key) .. ":" .. enc(canonical)
  return indexed and suffix or nil, by_value and "/" .. suffix or nil
end

-- A thread's score in a threads-by-value index: at least id_score() of each of its
-- checkpoints with the value, so that a reader can visit the threads newest first and stop
-- early. For an id that starts like a lowercase UUID ("1f0b2c3d-4e5f-6..."; LangGraph's are
-- UUIDv6, whose text sorts by time), its first 13 hex digits as a number (exact in a
-- double): for two such ids, lexical order implies the order of their scores. Any other id:
-- math.huge ("inf" in the index). The same rule: core/rules.py's id_score().
local function id_score(id)
  local a, b, c = string.match(id, "^([0-9a-f]+)%-([0-9a-f]+)%-([0-9a-f])")
  if a and #a == 8 and #b == 4 then return tonumber(a .. b .. c, 16) end
  return math.huge
end

-- A score as Redis takes it (Lua would format a number with 14 digits only).
local function score_arg(score)
  return score == math.huge and "inf" or string.format("%.0f", score)
end

-- Enter thread K.tag in the threads-by-value index of `suffix`, scored at least by checkpoint
-- `id` (ZADD GT: a score only grows, so it stays an upper bound whatever is deleted), which
-- then lives at least `ttl` seconds more (0: forever; expiries only grow, as the index is
-- shared), and in the thread's K.values, which lives as long as the thread. A new entry
-- sweeps two others whose thread is gone (expired; a delete takes its thread out): the index
-- stays bounded. index_thread does both; a put with several values enters the indexes one by
-- one and K.values once (note_thread_values). `score`: score_arg(id_score(id)).
local function enter_threads_index(K, suffix, ttl, score)
  local index = K.threads_with(suffix)
  local left = redis.call("PTTL", index)
  if redis.call("ZADD", index, "GT", score, K.tag) == 1 and left ~= -2 then
    for _, other in ipairs(redis.call("ZRANDMEMBER", index, "2")) do
      if other ~= K.tag and not K.thread_exists(other) then
        redis.call("ZREM", index, other)
      end
    end
  end
  keep_alive(index, ttl, left == -2, left)
end

local function note_thread_values(K, suffixes, ttl)
  local values_created = is_new(K.values, ttl)
  for first = 1, #suffixes, 4000 do  -- unpack() has a limit of a few thousand values
    redis.call("SADD", K.values, unpack(suffixes, first, math.min(first + 3999, #suffixes)))
  end
  keep_alive(K.values, ttl, values_created)
end

local function index_thread(K, suffix, id, ttl)
  enter_threads_index(K, suffix, ttl, score_arg(id_score(id)))
  note_thread_values(K, { suffix }, ttl)
end

-- A global index that several threads share (a ZSET): keep it alive at least `own` ms more
-- (-1: forever; 0: this thread needs it no more), and no longer than its entries need. A
-- persistent one may start to expire when its few members (at most 64) all name what
-- expires: at the longest of their lives (entries of what is gone are removed).
-- `life(member)`: nil for this thread's own entry, else the PTTL of what the entry names.
-- Returns the work done.
local function settle_shared_index(key, own, life)
  local left = redis.call("PTTL", key)
  if left == -2 then return 1 end
  if own == -1 then
    if left ~= -1 then redis.call("PERSIST", key) end
    return 2
  end
  if left >= 0 then
    if left < own then redis.call("EXPIRE", key, math.ceil(own / 1000)) end
    return 2
  end
  local listed = redis.call("ZRANGE", key, 0, 64)
  if #listed > 64 then return 2 end
  local longest = own
  for _, member in ipairs(listed) do
    local other = life(member)
    if other == -1 then return 2 + #listed end
    if other == -2 then
      redis.call("ZREM", key, member)
    elseif other and other > longest then
      longest = other
    end
  end
  if longest > 0 then redis.call("EXPIRE", key, math.ceil(longest / 1000)) end
  return 3 + #listed
end

-- A metadata index (members "<id>\0{T}:N": checkpoints).
local function settle_metadata_index(prefix, tag, key, own)
  return settle_shared_index(key, own, function(member)
    local id, member_tag, ns = parse_member(member)
    if member_tag == tag then return nil end
    return redis.call("PTTL", keyspace(prefix, member_tag).checkpoint(ns, id))
  end)
end

-- A threads-by-value index (members: thread tags).
local function settle_threads_index(K, key, own)
  return settle_shared_index(key, own, function(member)
    if member == K.tag then return nil end
    return K.thread_life(member)
  end)
end

-- Threads with a run that run_id's metadata index does not name by its text (standalone
-- servers): delete_for_runs finds a run's threads in that index by the canonical form of the
-- run id it is given, a JSON string, while it deletes by the record's r (the text of the
-- metadata's run_id); a run_id that is not a string, or a longer one than the index holds
-- (metadata_entries), puts its thread here, and delete_for_runs visits these threads too. A
-- new member checks two others, removing those whose thread is gone: the set stays bounded.
-- `canonical`: the checkpoint's metadata run_id (canonical JSON), nil when it has none.
local function note_unindexed_run(K, prefix, canonical)
  if canonical and string.byte(canonical, 1) == 34 and #canonical <= 256 then return end
  local key = prefix .. ":rx"
  if redis.call("SADD", key, K.tag) == 1 then
    for _, other in ipairs(redis.call("SRANDMEMBER", key, 2)) do
      if other ~= K.tag and not K.thread_exists(other) then redis.call("SREM", key, other) end
    end
  end
end

-- Take thread K.tag out of the threads-by-value index of `suffix` (it goes whole, or has no
-- checkpoint left); the index may then expire with the threads left in it. Returns the work.
local function leave_threads_index(K, suffix)
  local index = K.threads_with(suffix)
  redis.call("ZREM", index, K.tag)
  return 1 + settle_threads_index(K, index, 0)
end

-- Keep checkpoint `id` alive at least `ttl` seconds more (0: forever), with what it needs
-- and what leads to it: its hash (and its ledger entry), its blobs, its namespace index, its
-- run index and the global metadata indexes it is in (`bv`, `run` and `ix`: its fields; all shared keys, so
-- their expiries only grow). `left`: the hash's PTTL when the caller has it.
local function keep_checkpoint_alive(K, ns, id, ttl, bv, run, ix, left)
  keep_record_alive(K, ns, id, ttl, left)
  keep_alive(K.index(ns), ttl, false)
  for _, ref in ipairs(split_refs(bv)) do
    local blob = K.blob(ns, ref)
    local blob_left = redis.call("PTTL", blob)
    if blob_left ~= -2 then keep_alive(blob, ttl, false, blob_left) end
  end
  if run then
    local run_left = redis.call("PTTL", K.run(run))
    if run_left ~= -2 then keep_alive(K.run(run), ttl, false, run_left) end
    keep_alive(K.runs, ttl, false)
  end
  local bounds_left = redis.call("PTTL", K.bounds)  -- (a cluster's; see include/lists.lua)
  if bounds_left ~= -2 then keep_alive(K.bounds, ttl, false, bounds_left) end
  for _, suffix in ipairs(split_refs(ix)) do
    local listed = by_value_suffix(suffix)
    if listed then  -- its thread's entry, made again if gone
      index_thread(K, listed, id, ttl)
    else
      local index = K.metadata_index(suffix)
      local index_left = redis.call("PTTL", index)
      if index_left ~= -2 then keep_alive(index, ttl, false, index_left) end
    end
  end
end

-- Drop a few members of a sorted-set index whose checkpoint is gone, chosen at random, so that
-- live members at the front (a pinned thread, a kept delta ancestor) never stop the cleanup:
-- each put samples more members than it adds, so dead members stay a bounded share.
local function sweep_index(key, is_dead, samples)
  for _, member in ipairs(redis.call("ZRANDMEMBER", key, samples)) do
    if is_dead(member) then redis.call("ZREM", key, member) end
  end
end

-- Take checkpoint N:I out of run `run`'s index (its record dropped, or replaced by one that
-- may name another run), and the run out of the thread's runs set `runs` once it has no
-- checkpoint left: a stale entry would make delete_for_runs of that run take the checkpoint.
local function unindex_run(K, runs, run, ns, id)
  local run_key = K.run(run)
  redis.call("SREM", run_key, ns .. ":" .. id)
  if redis.call("EXISTS", run_key) == 0 then redis.call("SREM", runs, run) end
end

-- Remove a checkpoint from the metadata indexes listed in its ix field. (Its thread stays in
-- the threads-by-value indexes: an entry there says the thread may have such checkpoints,
-- and a reader checks; entries of threads that are gone are swept.)
local function unindex_checkpoint(K, ns, id, ix)
  for _, suffix in ipairs(split_refs(ix)) do
    if not by_value_suffix(suffix) then
      redis.call("ZREM", K.metadata_index(suffix), K.member(ns, id))
    end
  end
end
