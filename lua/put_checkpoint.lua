#!lua
--[[
  put_checkpoint: store one checkpoint, its new channel values and every index entry, atomically.

  KEYS[1]  P:th:{T}         thread index (SET of namespaces), the thread's root
  KEYS[2]  P:idx:{T}:N      namespace index (ZSET of checkpoint ids)
  KEYS[3]  P:cp:{T}:N:I     the checkpoint record (include/record.lua)

  ARGV[1]  prefix P                 ARGV[2]  hash tag {T}
  ARGV[3]  namespace N (encoded)    ARGV[4]  checkpoint id (raw)
  ARGV[5]  parent checkpoint id (raw, "" for none)
  ARGV[6]  the record's metadata filter fields "m:<key>" (canonical JSON), packed as the
           record holds them (include/record.lua), in the order of the m triples below
  ARGV[7]  the record's fields md (metadata: "<type>\0<bytes>") and ck (the checkpoint
           without channel values: "<type>\0<bytes>"), packed, in that order
  ARGV[8]  blob refs of every channel with a value, then ",," and those of the bases the
           values sent with this call were compressed against: "C:V,C:V,,C:V" (the script adds
           the bases of the shared blobs; see bv in include/refs.lua)
  ARGV[9]  run id (encoded, "" for none)
  ARGV[10] the saver's default ttl in seconds (0 for none); the thread's own setting wins
  ARGV[11] global metadata index: "-" for none, "~<hint>" on a cluster (the threads-by-value
           lists written ahead, see include/lists.lua), else the saver's indexed metadata
           keys, encoded, comma-separated (maybe ""); the keys registered in P:mk (raw) by any
           saver of the prefix are indexed too, so that a registered index stays complete
  ARGV[12] keep_last: keep only the newest this many checkpoints of the namespace (0: all);
           see include/trim.lua
  ARGV[13] the id's score in the threads-by-value indexes: score_arg(id_score(id)) (see
           include/indexes.lua; computed by the client)
  ARGV[14] "1" when a put without a ttl sweeps its indexes (the client picks one put in four at
           random), else "0"; a put with a ttl always does
  ARGV[15] the deadline the client noted last for the thread in the registry of live threads
           (core/deadlines.py), 0 for none: the reply names the new one only when it moved by
           NOTE_EVERY's share of the ttl since (on the server's clock: the client's may be off)
  ARGV[16] m, the number of metadata filter fields, then m triples: field "m:<key>", canonical
           JSON, and the suffix of the global indexes the value may get, "<key>:<canonical>"
           encoded (keys.metadata_index_suffix), or "" for a value that gets none (null, or
           longer than MAX_INDEXED_VALUE): encoded by the client, a gsub per value less here
  then b, the number of new blobs, then b pairs: ref "C:V", "<type>\0<bytes>"
  then s, the number of the other value refs of ARGV[8] (blobs stored before), then those s
  then d, the number of the bases of ARGV[8], then d pairs: ref, and what the stored base must
  be for the values sent against it: "u:b:<mark>;", the head of a base stored with its mark
  (src/langgraph/checkpoint/rediskv/compression.py), or the SHA1 (hex) of all the stored
  bytes of a base written before marks

  Counts: KEYS 3; ARGV 16..
  Built by: core/calls.py put_checkpoint()
  Reply: when stored, the unix second until which the thread's keys are due (its new
  ledger entry's deadline) for a checkpoint of the graph's own namespace (N = "") put with a
  ttl, when the client is to note it (ARGV[15]), else 0; "REAPING" when an earlier delete,
  prune or copy of the thread left garbage to reap first (nothing written); or { ref, ... }:
  blobs the checkpoint references that are neither in this call nor stored (expired, or
  removed by a concurrent prune), or stored but without their base: nothing was written,
  and the client sends the call again with those values included (a missing base: with the
  values compressed against it in full);
  or, on a cluster, { "INDEX", inc, S, score, ... } (include/lists.lua): lists that must hold
  the thread first; nothing was written but the thread's incarnation.
  A value sent against a base never replaces a stored value of another form: the records that
  reference the stored one list its base, not this one's.

  Maxmemory: the script is flagged (no allow-oom), so a server over its maxmemory refuses it
  before it writes anything.
]]
-- requires: replies, keyschema, refs, expiry, record, indexes, trim, lists, ledger

-- A global metadata index of up to this many members is not swept by puts.
local SWEPT_INDEX_SIZE = 64
-- The client notes a thread's deadline again once it moved by 1/NOTE_EVERY of the ttl.
local NOTE_EVERY = 16

local prefix, tag, ns, id = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local K = keyspace(prefix, tag)
if redis.call("EXISTS", K.gc) == 1 then return REAPING end
local cp = KEYS[3]

-- the new blobs of this call, then a check that every other referenced blob is still there
local keep = tonumber(ARGV[12])
local i = 16
local m = tonumber(ARGV[i])
local meta_first = i + 1
i = i + 3 * m + 1
local nblobs, blob_first = tonumber(ARGV[i]), i + 1
local shared_first = blob_first + 2 * nblobs + 1
local left_of, missing = {}, {}
local shared_last = shared_first + tonumber(ARGV[shared_first - 1]) - 1
for j = shared_first, shared_last do
  local left = redis.call("PTTL", K.blob(ns, ARGV[j]))
  if left == -2 then missing[#missing + 1] = ARGV[j] else left_of[ARGV[j]] = left end
end
-- The bases of the values sent with this call: still stored, and the very bytes they were
-- compressed against (a base deleted and written again may differ, or be compressed itself).
-- A base's mark is a digest of its bytes: its head tells, whatever its size (a chat's
-- history).
local bases_first = shared_last + 2
for j = 0, tonumber(ARGV[bases_first - 1]) - 1 do
  local base, check = ARGV[bases_first + 2 * j], ARGV[bases_first + 2 * j + 1]
  local blob, same = K.blob(ns, base), false
  if string.sub(check, 1, 4) == "u:b:" then
    same = has_mark(blob, check)
  else
    local stored = redis.call("GET", blob)
    same = stored and redis.sha1hex(stored) == check
  end
  if same then
    left_of[base] = redis.call("PTTL", blob)
  else
    missing[#missing + 1] = base  -- the client sends the values in full
  end
end
-- A shared blob compressed against a base needs it: the record lists the base too, so that
-- the base lives as long as the record (every walk that keeps or renews blobs goes by bv).
-- The blob's head tells (a stored value never takes another base). (Reading the bases from
-- the parent's record instead cost more: its head read and parsed, its refs matched.)
local bv = ARGV[8]
for j = shared_first, shared_last do
  local ref = ARGV[j]
  local base = left_of[ref] and stored_base(K.blob(ns, ref))
  if base and not has_ref(bv, base) then
    local left = redis.call("PTTL", K.blob(ns, base))
    if left == -2 then
      missing[#missing + 1] = ref  -- unreadable without it: sent again, in full
    else
      left_of[base] = left
      bv = with_base(bv, base)
    end
  end
end
if #missing > 0 then return missing end

local ttl, ttl_setting_now = thread_ttl(K, tonumber(ARGV[10]))

-- on a cluster, the threads-by-value lists this checkpoint needs hold the thread first
local lists_hint = string.sub(ARGV[11], 1, 1) == "~" and string.sub(ARGV[11], 2)
if lists_hint then
  local needs = {}
  for j = 0, m - 1 do
    add_list_needs(needs, ARGV[meta_first + 3 * j], ARGV[meta_first + 3 * j + 1], id)
  end
  if ARGV[9] ~= "" then add_list_needs(needs, "r", ARGV[9], id) end
  local refused = cover(K, lists_hint, needs, ttl)
  if refused then return refused end
end

-- Re-putting an id replaces it: drop the index entries of the record being replaced, and
-- keep track of the blobs it referenced that the new record does not (they may be shared
-- with other checkpoints, so they are not removed here; delete and prune find them).
local replaced = record(cp)  -- (all of it: its pending writes stay with the id)
local old = { replaced.r or false, replaced.ix or false, replaced.bv or false }
if old[1] then unindex_run(K, K.runs, old[1], ns, id) end
unindex_checkpoint(K, ns, id, old[2])

-- Loose blobs: those that may outlive every checkpoint referencing them, recorded so that
-- delete and prune still find them. The blobs of a replaced record that its replacement
-- does not reference; and, with a ttl, blobs this checkpoint shares that live longer than it
-- (written without a ttl or with a longer one: expiries only grow, so such a blob stays after
-- this checkpoint expires, and after the record it replaced).
local loose_refs, loose_lefts = {}, {}
local function loose(ref, left)
  loose_refs[#loose_refs + 1] = ref
  loose_lefts[#loose_lefts + 1] = left
end
if old[3] then
  local now = {}
  for _, ref in ipairs(split_refs(bv)) do now[ref] = true end
  for _, ref in ipairs(split_refs(old[3])) do
    if not now[ref] then
      local left = redis.call("PTTL", K.blob(ns, ref))
      if left ~= -2 then loose(ref, left) end
    end
  end
end
-- A blob sent with this call may exist already (a record put again with the same version):
-- it keeps its expiry if that is longer, as it may be shared with longer-lived checkpoints.
local sent_left = {}
if ttl > 0 then
  for j = 0, nblobs - 1 do
    local ref = ARGV[blob_first + 2 * j]
    local left = redis.call("PTTL", K.blob(ns, ref))
    sent_left[ref] = left
    if left == -1 or left > ttl * 1000 then loose(ref, left) end
  end
  for ref, left in pairs(left_of) do
    if left == -1 or left > ttl * 1000 then loose(ref, left) end
  end
end
add_loose(K, ns, loose_refs, loose_lefts)

-- the values sent with this call. A stored value's bytes never change (values compressed
-- against it would not read), but for a value stored against a base: the full one may
-- replace it (no value is compressed against a compressed one).
for j = 0, nblobs - 1 do
  local ref, value = ARGV[blob_first + 2 * j], ARGV[blob_first + 2 * j + 1]
  local blob = K.blob(ns, ref)
  if redis.call("SET", blob, value, "NX") then
    expire(blob, ttl)
  else
    local base, stored = blob_base(value), stored_base(blob)
    if stored and not base then
      redis.call("SET", blob, value, "KEEPTTL")
    elseif stored and stored ~= base then
      -- stored against another base: the records that reference it list that one, this one
      -- lists both (or replaces it, when that base is gone and the value unreadable as it is)
      local left = redis.call("PTTL", K.blob(ns, stored))
      if left == -2 then
        redis.call("SET", blob, value, "KEEPTTL")
      else
        left_of[stored] = left
        bv = with_base(bv, stored)
      end
    end
    keep_alive(blob, ttl, false, sent_left[ref])
  end
end

-- the whole record in one SET (include/record.lua): the small fields first, which most
-- readers want (they stop reading at the last of them): bv, p, r, ix, then the metadata's
-- filter fields as the client packed them (ARGV[6]), df; then md and ck (packed by the
-- client, ARGV[7]) and the pending writes of a record put again, by name
local head = { pack_field("bv", bv) }
if ARGV[5] ~= "" then head[#head + 1] = pack_field("p", ARGV[5]) end
local run = ARGV[9]
if run ~= "" then
  head[#head + 1] = pack_field("r", run)
  local runs_created = is_new(K.runs, ttl)
  redis.call("SADD", K.runs, run)
  keep_alive(K.runs, ttl, runs_created)
  local run_key = K.run(run)
  local run_created = is_new(run_key, ttl)
  redis.call("SADD", run_key, ns .. ":" .. id)
  keep_alive(run_key, ttl, run_created)
else
  local left = redis.call("PTTL", K.runs)  -- it must outlive the run indexes it lists
  if left ~= -2 then keep_alive(K.runs, ttl, false, left) end
end

-- global metadata indexes: the saver's keys and every registered key the metadata has
if ARGV[11] ~= "-" and not lists_hint then
  local wanted, registered = {}, {}  -- raw keys (the registry holds them raw)
  for _, key in ipairs(redis.call("HKEYS", prefix .. ":mk")) do
    wanted[key] = true
    registered[key] = true
  end
  for _, key in ipairs(split_refs(ARGV[11])) do
    key = dec(key)
    wanted[key] = true
    -- the saver registered its keys before its first put: one missing here was lost (the
    -- registry deleted under the saver, a FLUSHDB): "building" until a reindex completes it,
    -- so that readers scan rather than trust it (and doctor says so)
    if not registered[key] then redis.call("HSETNX", prefix .. ":mk", key, "building") end
  end
  local suffixes, ix, listed = {}, {}, {}
  local score = ARGV[13]
  for j = meta_first, meta_first + 3 * m - 1, 3 do
    local indexed, by_value = metadata_entries(string.sub(ARGV[j], 3), ARGV[j + 1], wanted,
      ARGV[j + 2])
    if indexed then
      suffixes[#suffixes + 1] = indexed
      ix[#ix + 1] = indexed
    end
    if by_value then
      listed[#listed + 1] = by_value_suffix(by_value)
      enter_threads_index(K, listed[#listed], ttl, score)
      ix[#ix + 1] = by_value
    end
  end
  if #listed > 0 then
    note_thread_values(K, listed, ttl)
    if not registered["\0threads"] then  -- (as for the saver's keys above)
      redis.call("HSETNX", prefix .. ":mk", "\0threads", "building")
    end
  end
  if #ix > 0 then head[#head + 1] = pack_field("ix", table.concat(ix, ",")) end
  if run ~= "" then
    local run_canonical = nil
    for j = meta_first, meta_first + 3 * m - 1, 3 do
      if ARGV[j] == "m:run_id" then run_canonical = ARGV[j + 1] end
    end
    note_unindexed_run(K, prefix, run_canonical)
  end
  if #suffixes > 0 then
    local member = K.member(ns, id)
    local function gone(other)
      if other == member then return false end
      local old_id, old_tag, old_ns = parse_member(other)
      return redis.call("EXISTS", checkpoint_key(prefix, old_tag, old_ns, old_id)) == 0
    end
    for _, suffix in ipairs(suffixes) do
      local index = K.metadata_index(suffix)
      local created = is_new(index, ttl)
      redis.call("ZADD", index, "0", member)
      keep_alive(index, ttl, created)
      -- a small index (a run's: a few checkpoints) is not swept: its dead members are few,
      -- readers skip them, and it expires whole with its checkpoints
      if redis.call("ZCARD", index) > SWEPT_INDEX_SIZE then sweep_index(index, gone, "2") end
    end
  end
end

head[#head + 1] = ARGV[6]
if keep > 0 then
  local counters = nil
  for j = meta_first, meta_first + 3 * m - 1, 3 do
    if ARGV[j] == "m:counters_since_delta_snapshot" then counters = ARGV[j + 1] end
  end
  head[#head + 1] = pack_field("df", delta_seeds(K, ns, ARGV[5], counters, value_refs(bv)))
end
head[#head + 1] = ARGV[7]
local writes = {}
for name in pairs(replaced) do
  if is_write_field(name) then writes[#writes + 1] = name end
end
table.sort(writes)
for _, name in ipairs(writes) do head[#head + 1] = pack_field(name, replaced[name]) end
redis.call("SET", cp, table.concat(head))  -- (over a record put before, of either layout)
expire(cp, ttl)
local ledger_left = redis.call("PTTL", K.ledger(ns))
local stale_ledger_left = nil  -- (the PTTL of a ledger the put makes anew)
local root_left = redis.call("PTTL", KEYS[1])
if expiries_shortened(root_left, ledger_left) then
  -- a writer that knows no ledger shortened the thread's expiries below its deadlines: the
  -- ledger starts again from the records' real expiries (note_deadline's backfill)
  redis.call("UNLINK", K.ledger(ns))
  stale_ledger_left, ledger_left = ledger_left, -2
end
-- (whether the index exists: asked once, for the ledger's check and for keep_alive below)
local index_there = (ttl > 0 or ledger_left ~= -2) and redis.call("EXISTS", KEYS[2]) == 1
if ledger_left ~= -2 and not index_there then
  if redis.call("SISMEMBER", KEYS[1], ns) == 1 then
    reindex_from_ledger(K, ns, KEYS[2])  -- the index was evicted
    index_there = redis.call("EXISTS", KEYS[2]) == 1
    -- it lives as long as the records it holds again (the ledger's life bounds theirs)
    if ttl > 0 and ledger_left ~= -1 then
      redis.call("PEXPIRE", KEYS[2], math.max(ledger_left, ttl * 1000))
    end
  else
    -- a namespace the root does not name starts anew: what its ledger says is of a thread
    -- deleted by a release that knows no ledger (0.1.0), or evicted whole, or expired (the
    -- graph's namespace's ledger then stayed, include/ledger.lua's drop_entry)
    redis.call("UNLINK", K.ledger(ns))
    stale_ledger_left, ledger_left = ledger_left, -2
  end
end
-- so that a reader tells its eviction from its expiry
local deadline = note_deadline(K, ns, id, ttl, ledger_left, ttl_setting_now)
if stale_ledger_left and stale_ledger_left > 0 and ns == "" then
  -- the new ledger lives at least as long as the one it replaces: the registry of live
  -- threads may hold a deadline that one kept (missing_root)
  keep_alive(K.ledger(ns), math.ceil(stale_ledger_left / 1000), false)
end
if ttl > 0 then
  -- its pending writes (kept when a record is put again, or stored before it) expire with
  -- it: they belong to this checkpoint alone, and must not outlive it
  local writes = K.writes(ns, id)
  local left = redis.call("PTTL", writes)
  if left == -1 or left > ttl * 1000 then redis.call("EXPIRE", writes, ttl) end
end
-- Every blob the checkpoint references lives at least as long as it: with a ttl, a channel
-- that has not changed for longer than the ttl survives while the thread is in use; without
-- one (a saver with ttl=None, a pinned thread), a blob written under a ttl stops expiring.
for ref, left in pairs(left_of) do
  if ttl > 0 or left ~= -1 then keep_alive(K.blob(ns, ref), ttl, false, left) end
end

local index_created = ttl == 0 or not index_there  -- (as is_new)
redis.call("ZADD", KEYS[2], "0", id)
keep_alive(KEYS[2], ttl, index_created)
redis.call("SADD", KEYS[1], ns)
keep_alive(KEYS[1], ttl, root_left == -2, root_left)

-- Index entries whose keys have expired are dropped a few at a time, so the indexes of a
-- long-lived thread stay bounded at a constant cost per put. Entries die by expiry, so a put
-- without a ttl adds none that can die: it checks one entry of each index on one put in four
-- (the client picks it at random: ARGV[14]), for those a thread written with a ttl before may
-- have left. (Until then a dead entry costs memory, never a wrong answer: readers skip it.)
if ttl > 0 or ARGV[14] == "1" then
  -- (an entry whose record was evicted stays, with its ledger entry: readers say it is lost)
  sweep_index(KEYS[2], function(other)
    if other == id or redis.call("EXISTS", K.checkpoint(ns, other)) == 1 then return false end
    if record_evicted(K, ns, other) then return false end
    redis.call("HDEL", K.ledger(ns), other)
    return true
  end, ttl > 0 and "3" or "1")
  for _, old_run_id in ipairs(redis.call("SRANDMEMBER", K.runs, ttl > 0 and "2" or "1")) do
    if redis.call("EXISTS", K.run(old_run_id)) == 0 then redis.call("SREM", K.runs, old_run_id) end
  end
end
if keep > 0 then trim_history(K, ns, keep) end
-- (the root, the index and the ledger live at least until the deadline: the client notes it
-- in the registry of live threads, thread_deadlines.lua, and include/ledger.lua's
-- missing_root relies on the graph's own namespace's ledger outliving it)
-- (on the server's clock, both sides of the comparison: a client's clock off by more than
-- the ttl would note every put, or none)
if ns ~= "" or deadline == 0 then return 0 end
local noted = tonumber(ARGV[15])
if noted == 0 or math.abs(deadline - noted) >= math.max(1, ttl / NOTE_EVERY) then
  return deadline
end
return 0
