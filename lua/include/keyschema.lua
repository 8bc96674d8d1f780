-- Shared by every script; the loader inlines this file where a script says `-- @include keyschema`.
-- The Lua half of src/langgraph/checkpoint/rediskv/keys.py (read its docstring for the layout).
-- Every key is derived from the prefix and the thread's hash tag, so a script only ever touches
-- keys in the slot of the KEYS it was given.

-- Percent-encode one key part: keep A-Z a-z 0-9 - . _ ~, write every other byte as %XX.
local function enc(s)
  return (string.gsub(s, "[^%w%-%._~]", function(c)
    return string.format("%%%02X", string.byte(c))
  end))
end

-- The key of a checkpoint hash (also K.checkpoint): for a thread other than the script's own.
local function checkpoint_key(prefix, tag, ns, id)
  return prefix .. ":cp:" .. tag .. ":" .. ns .. ":" .. enc(id)
end

-- The last keyspace made. A Redis Function library keeps it from one call to the next (the
-- calls of a chat turn are of one thread), which saves making its closures again each time; a
-- script starts without it. Nothing writes to a keyspace once it is made.
local last_keyspace = nil

local function keyspace(prefix, tag)
  local K = last_keyspace
  if K and K.tag == tag and K.prefix == prefix then return K end
  K = {}
  K.prefix = prefix
  K.thread = prefix .. ":th:" .. tag
  K.runs = prefix .. ":runs:" .. tag
  K.ttl = prefix .. ":ttl:" .. tag
  -- the threads-by-value indexes the thread is listed in (their suffixes), so that a delete
  -- takes it out of every one, also of those only checkpoints gone before listed it
  K.values = prefix .. ":tv:" .. tag
  -- on a cluster: what the threads-by-value lists are known to hold of the thread (its
  -- incarnation, and a score bound per list; see include/lists.lua)
  K.bounds = prefix .. ":tb:" .. tag
  -- garbage of an operation done in steps (delete, prune, copy) still to be reaped: while it
  -- exists, writers wait (they reply "REAPING" and the client reaps first)
  K.gc = prefix .. ":gc:" .. tag
  function K.index(ns) return prefix .. ":idx:" .. tag .. ":" .. ns end
  function K.writes_index(ns) return prefix .. ":wi:" .. tag .. ":" .. ns end
  function K.checkpoint(ns, id) return checkpoint_key(prefix, tag, ns, id) end
  function K.writes(ns, id) return prefix .. ":w:" .. tag .. ":" .. ns .. ":" .. enc(id) end
  function K.blob(ns, ref) return prefix .. ":blob:" .. tag .. ":" .. ns .. ":" .. ref end
  function K.run(run) return prefix .. ":run:" .. tag .. ":" .. run end
  -- loose blobs: refs of namespace N that a replaced checkpoint record referenced and its
  -- replacement does not; delete and prune find them here, as no checkpoint leads to them
  function K.loose_blobs(ns) return prefix .. ":lb:" .. tag .. ":" .. ns end
  -- global metadata index (standalone servers only): "<key>:<canonical JSON>", encoded
  function K.metadata_index(suffix) return prefix .. ":mi:" .. suffix end
  -- threads by metadata value (standalone servers only): the tags of the threads that have
  -- (or had) a checkpoint with that value, for the values thread_indexed() takes
  function K.threads_with(suffix) return prefix .. ":tm:" .. suffix end
  -- whether another thread exists: its root, or its gc root (a copy not yet published)
  function K.thread_exists(other_tag)
    return redis.call("EXISTS", prefix .. ":th:" .. other_tag, prefix .. ":gc:" .. other_tag) > 0
  end
  -- how long another thread lives (PTTL of its root: -1 forever, -2 gone); a copy not yet
  -- published may live forever
  function K.thread_life(other_tag)
    local left = redis.call("PTTL", prefix .. ":th:" .. other_tag)
    if left == -2 and redis.call("EXISTS", prefix .. ":gc:" .. other_tag) == 1 then return -1 end
    return left
  end
  K.tag = tag
  -- a checkpoint's member in a metadata index: its id first, so lexical order = time order
  function K.member(ns, id) return id .. "\0" .. tag .. ":" .. ns end
  last_keyspace = K
  return K
end

-- The keys of job n of a thread's gc root (see include/reap.lua): its progress, and the
-- containers it works through (a renamed thread root, old indexes, ...).
local function jobspace(prefix, tag, n)
  local G = {}
  G.state = prefix .. ":gc:" .. tag .. ":" .. n
  function G.part(name) return G.state .. ":" .. name end
  function G.ns_part(name, ns) return G.state .. ":" .. name .. ":" .. ns end
  return G
end

-- Split a metadata index member into checkpoint id, hash tag and namespace. The id may hold
-- any byte; tag and namespace are encoded, so the last NUL is the separator.
local function parse_member(member)
  local sep, at = nil, 0
  repeat  -- plain find: Lua 5.1 patterns cannot hold a NUL
    sep, at = at, string.find(member, "\0", at + 1, true)
  until not at
  local id, rest = string.sub(member, 1, sep - 1), string.sub(member, sep + 1)
  local close = string.find(rest, "}:", 1, true)
  return id, string.sub(rest, 1, close), string.sub(rest, close + 2)
end

-- SADD every member of `members` to `key`, 4,000 at a time: unpack() fails beyond about 8,000
-- values ("too many results to unpack"), and a record, a run list or a namespace list may
-- hold more.
local function add_members(key, members)
  for first = 1, #members, 4000 do
    redis.call("SADD", key, unpack(members, first, math.min(first + 3999, #members)))
  end
end

-- Split "C1:V1,C2:V2" (the bv field, also the ix field) into its parts, skipping empty ones;
-- encoded parts never contain ",". (A plain find: gmatch's character class costs more.)
local function split_refs(bv)
  local refs, n, pos = {}, 0, 1
  if not bv then return refs end
  local size = #bv
  while pos <= size do
    local comma = string.find(bv, ",", pos, true) or size + 1
    if comma > pos then
      n = n + 1
      refs[n] = string.sub(bv, pos, comma - 1)
    end
    pos = comma + 1
  end
  return refs
end

-- The channel of a write record: "<len path>:<len channel>:" .. path .. channel .. value.
local function record_channel(record)
  local a = string.find(record, ":", 1, true)
  local b = string.find(record, ":", a + 1, true)
  local path_len = tonumber(string.sub(record, 1, a - 1))
  local channel_len = tonumber(string.sub(record, a + 1, b - 1))
  local first = b + 1 + path_len
  return string.sub(record, first, first + channel_len - 1)
end

-- The encoded channel of a blob ref "C:V".
local function ref_channel(ref)
  return string.sub(ref, 1, string.find(ref, ":", 1, true) - 1)
end

-- The ref of the base a stored blob was compressed against, for a blob stored
-- "zr:<base ref>;<type>\0<bytes>" (src/langgraph/checkpoint/rediskv/compression.py), or nil
-- for one stored in full. A record that references such a blob references its base too.
local function blob_base(stored)
  if string.sub(stored, 1, 3) ~= "zr:" then return nil end
  local semi = string.find(stored, ";", 4, true)
  return semi and string.sub(stored, 4, semi - 1) or nil
end

-- Whether the blob at `key` is stored with `mark` ("u:b:<digest>;", the head of a value that
-- may serve as a base: compression.py), so holds the very bytes of the client's that bear it;
-- only the head is read, whatever the blob's size (false when it is gone).
local function has_mark(key, mark)
  return redis.call("GETRANGE", key, "0", tostring(#mark - 1)) == mark
end

-- blob_base of the blob at `key` ("" when gone), reading only the head of the value.
local function stored_base(key)
  local head = redis.call("GETRANGE", key, "0", "255")  -- (strings: a number is printf'd)
  if string.sub(head, 1, 3) == "zr:" and not string.find(head, ";", 4, true) then
    head = redis.call("GET", key) or ""  -- a base ref longer than the head
  end
  return blob_base(head)
end

-- A record's bv field lists the refs of its values ("C:V,C:V"), then ",," and the refs of the
-- bases some of them are stored against ("C:V,C:V,,C:V"); split_refs() reads both parts as
-- one list (it skips the empty item), so whatever keeps, renews, copies or removes a record's
-- blobs does it to the bases too. The ",," is there, bases or not, when the list of bases is
-- complete (a record of this version); a record without it was written before bases existed.

-- The refs of a record's values (its bv without the bases).
local function value_refs(bv)
  local cut = bv and string.find(bv, ",,", 1, true)
  return split_refs(cut and string.sub(bv, 1, cut - 1) or bv)
end

-- Whether bv lists ref (in either part).
local function has_ref(bv, ref)
  return string.find("," .. bv .. ",", "," .. ref .. ",", 1, true) ~= nil
end

-- bv with one more base (and the ",," in any case).
local function with_base(bv, base)
  if string.sub(bv, -2) == ",," then return bv .. base end
  return bv .. (string.find(bv, ",,", 1, true) and "," or ",,") .. base
end

-- A record's bv with the base of each of its values that is stored against one it does not
-- list yet, and those bases (a copied record: the target's stored values may have other bases
-- than the source's).
local function with_stored_bases(K, ns, bv)
  local added = {}
  for _, ref in ipairs(value_refs(bv)) do
    local base = stored_base(K.blob(ns, ref))
    if base and not has_ref(bv, base) then
      bv = with_base(bv, base)
      added[#added + 1] = base
    end
  end
  if not string.find(bv, ",,", 1, true) then bv = bv .. ",," end
  return bv, added
end

-- Undo enc().
local function dec(s)
  if not string.find(s, "%", 1, true) then return s end  -- (most parts: nothing encoded)
  return (string.gsub(s, "%%(%x%x)", function(h) return string.char(tonumber(h, 16)) end))
end

-- Give a key that was just written or read its expiry (ttl 0: none).
local function expire(key, ttl)
  if ttl > 0 then redis.call("EXPIRE", key, ttl) end
end

-- Whether `key` is about to be created, as keep_alive needs to know: without a ttl it does
-- not matter (keep_alive then persists the key either way), so that costs no call.
local function is_new(key, ttl)
  return ttl == 0 or redis.call("EXISTS", key) == 0
end

-- Keep a key alive at least as long as what was just written into it, or what depends on it
-- (ttl 0: forever). Expiries only ever grow here: an index, a blob or a metadata index may be
-- shared with checkpoints written under a longer ttl, or none (a saver without ttl, a pinned
-- thread), and must outlive them. `left` is the key's PTTL when the caller has it.
local function keep_alive(key, ttl, created, left)
  if ttl == 0 then
    if created or left ~= -1 then redis.call("PERSIST", key) end
  elseif created then
    redis.call("EXPIRE", key, ttl)
  else
    left = left or redis.call("PTTL", key)
    if left >= 0 and left < ttl * 1000 then redis.call("EXPIRE", key, ttl) end
  end
end

-- Which metadata values put their thread in a threads-by-value index, so that a global
-- filter on any key (not only the indexed ones) visits only the threads that may match:
-- JSON strings of at most 128 characters (user ids, assistant ids, tenants, LangGraph's
-- source: a value of every thread still answers a limit newest first), except for run_id,
-- which has a metadata index of its own by default, and LangGraph's step, a number anyway.
-- Numbers are left out: most are counters, which would list a thread under a value per
-- checkpoint. The same rule: core.py's thread_indexed().
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
-- math.huge ("inf" in the index). The same rule: core.py's id_score().
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
-- and what leads to it: its hash, its blobs, its namespace index, its run index and the
-- global metadata indexes it is in (`bv`, `run` and `ix`: its fields; all shared keys, so
-- their expiries only grow). `left`: the hash's PTTL when the caller has it.
local function keep_checkpoint_alive(K, ns, id, ttl, bv, run, ix, left)
  keep_alive(K.checkpoint(ns, id), ttl, false, left)
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

-- The longer of two remaining lives in ms (-1: forever).
local function longer(a, b)
  if a == -1 or b == -1 then return -1 end
  return a > b and a or b
end

-- Add `refs` to namespace ns's loose-blob set (see K.loose_blobs), `lefts` the PTTLs of their
-- blobs (ms, -1: no expiry); the set lives as long as its longest-lived member.
local function add_loose(K, ns, refs, lefts)
  if #refs == 0 then return end
  local key = K.loose_blobs(ns)
  local created = redis.call("EXISTS", key) == 0
  local longest = 0
  for j = 1, #refs do longest = longer(longest, lefts[j]) end
  for first = 1, #refs, 4000 do  -- unpack() has a limit of a few thousand values
    redis.call("SADD", key, unpack(refs, first, math.min(first + 3999, #refs)))
  end
  keep_alive(key, longest == -1 and 0 or math.ceil(longest / 1000), created)
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

-- The expiry of one thread: its own setting (P:ttl:{T}, "0" when pinned) wins over the
-- saver's default. An active thread's own setting is refreshed with the rest of its keys.
local function thread_ttl(K, default)
  local own = redis.call("GET", K.ttl)
  if not own then return default end
  local ttl = tonumber(own)
  expire(K.ttl, ttl)
  return ttl
end
