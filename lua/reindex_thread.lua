#!lua
--[[
  reindex_thread: add a stretch of one thread's checkpoints to the global metadata indexes of
  every key in the registry P:mk, and the thread to the threads-by-value indexes of their
  metadata values (standalone servers), for checkpoints written before the key was
  registered, or by a version without threads-by-value indexes. Bounded: at most ARGV[5]
  checkpoints per call; the reply says where to go on.

  KEYS[1]  P:th:{T}         thread index (SET of namespaces), the thread's root

  ARGV[1]  prefix P   ARGV[2]  hash tag {T}
  ARGV[3]  namespace to resume in (encoded), "" to start with the first (in byte order)
  ARGV[4]  checkpoint id to resume after (raw), "" for the start of the namespace
  ARGV[5]  step: at most this many checkpoints visited
  ARGV[6]  on a cluster: "~<hint>" (include/lists.lua); the stretch's checkpoints need the
           thread in the threads-by-value lists, which the client writes ahead

  Counts: KEYS 1; ARGV 5..6
  Built by: core/calls.py reindex_thread()
  Reply: { added } when the thread is done, else { added, namespace, id } to resume from;
  added is the number of index entries added (on a cluster: of list bounds recorded); or,
  on a cluster, { "INDEX", inc, S, score, ... }: the client enters the thread in those lists
  and sends the same call again with its hint.
]]
-- requires: keyschema, refs, expiry, record, indexes, lists

local prefix = ARGV[1]
local K = keyspace(prefix, ARGV[2])
local step = tonumber(ARGV[5])
-- on a cluster: the hint (the registry is in another slot, and there are no metadata indexes)
local lists_hint = ARGV[6] and string.sub(ARGV[6], 2)
local registered = {}
if not lists_hint then
  for _, key in ipairs(redis.call("HKEYS", prefix .. ":mk")) do registered[key] = true end
end

local namespaces = redis.call("SMEMBERS", KEYS[1])
table.sort(namespaces)
local added, visited = 0, 0
-- on a cluster: what the stretch needs of the lists, and how long K.bounds must then live
local needs, forever, longest = {}, false, 0
local function finish(reply)
  if not lists_hint then return reply end
  local refused, recorded = cover(K, lists_hint, needs, forever and 0 or math.ceil(longest / 1000))
  if refused then return refused end
  reply[1] = recorded
  return reply
end
for _, ns in ipairs(namespaces) do
  if ns >= ARGV[3] then
    local lower = (ns == ARGV[3] and ARGV[4] ~= "") and ("(" .. ARGV[4]) or "-"
    local ids = redis.call("ZRANGEBYLEX", K.index(ns), lower, "+", "LIMIT", 0, step - visited)
    for _, id in ipairs(ids) do
      local cp = K.checkpoint(ns, id)
      local rec = record(cp)
      local left = redis.call("PTTL", cp)
      if left ~= -2 and lists_hint then
        for name, value in pairs(rec) do add_list_needs(needs, name, value, id) end
        if left == -1 then forever = true elseif left > longest then longest = left end
      elseif left ~= -2 then
        if rec.r then note_unindexed_run(K, prefix, rec["m:run_id"]) end
        -- the indexes live as long as the checkpoint (forever when it has no expiry)
        local life = left == -1 and 0 or math.ceil(left / 1000)
        local ix = split_refs(rec.ix)
        local have = {}
        for _, suffix in ipairs(ix) do have[suffix] = true end
        local function add(suffix)
          ix[#ix + 1] = suffix
          have[suffix] = true
          added = added + 1
        end
        -- an entry the record lists is written again when its index lost it (an eviction
        -- took the index, or the thread's K.values): nothing else would ever rebuild it
        local member = K.member(ns, id)
        local function thread_entered(suffix)  -- both entries index_thread writes are there
          local score = redis.call("ZSCORE", K.threads_with(suffix), K.tag)
          return score and tonumber(score) >= id_score(id)
            and redis.call("SISMEMBER", K.values, suffix) == 1
        end
        for name, canonical in pairs(rec) do
          if string.sub(name, 1, 2) == "m:" then
            local indexed, by_value = metadata_entries(string.sub(name, 3), canonical, registered)
            local index = indexed and K.metadata_index(indexed)
            if indexed and not (have[indexed] and redis.call("ZSCORE", index, member)) then
              local created = redis.call("EXISTS", index) == 0
              redis.call("ZADD", index, 0, member)
              keep_alive(index, life, created)
              if have[indexed] then added = added + 1 else add(indexed) end
            end
            local suffix = by_value and by_value_suffix(by_value)
            if by_value and not (have[by_value] and thread_entered(suffix)) then
              index_thread(K, suffix, id, life)
              if have[by_value] then added = added + 1 else add(by_value) end
            end
          end
        end
        if #ix > #split_refs(rec.ix) then set_record_field(cp, "ix", table.concat(ix, ",")) end
      end
      visited = visited + 1
      if visited >= step then return finish({ added, ns, id }) end
    end
  end
end
return finish({ added })
