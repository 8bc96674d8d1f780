#!lua flags=allow-oom
--[[
  get_delta_channel_history: the ancestor walk behind LangGraph's DeltaChannel, on the server.
  From the target checkpoint, follow the parent ids (the `p` fields). At every ancestor (not
  the target itself), for every requested channel still open: take the ancestor's writes to
  the channel; and if the ancestor stores a value for the channel (its `bv` has a ref for the
  channel and that blob exists), that value is the channel's seed and the channel closes there
  (the seed ancestor's own writes are taken too). The walk ends when every channel is closed,
  at the root, at a parent that no longer exists, or when the budget runs out (then the reply
  carries a cursor to go on from). The semantics of InMemorySaver.get_delta_channel_history.

  KEYS[1]  P:idx:{T}:N      namespace index (ZSET of checkpoint ids)

  ARGV[1]  prefix P   ARGV[2]  hash tag {T}   ARGV[3]  namespace N (encoded)
  ARGV[4]  checkpoint id (raw), "" for the latest of the namespace
  ARGV[5]  "0": ARGV[4] is the target, the walk starts at its parent;
           "1": ARGV[4] is the cursor of an earlier reply, the walk starts at it
  ARGV[6]  budget: at most this many ancestors are visited, which bounds how long the server
           is busy; the client goes on from the cursor
  ARGV[7]  the saver's default ttl in seconds (0: none); the thread's own setting wins. Every
           key the walk reads gets a fresh expiry (none with ttl 0), refresh_on_read or not: the
           chain is part of the state of the checkpoints after it, and put_checkpoint.lua
           refreshes only the keys of the checkpoint it writes, so without this a chain older
           than the ttl would expire under a thread that is still in use
  ARGV[8..] the channels (raw names, no duplicates)

  Counts: KEYS 1; ARGV 7..
  Built by: core/calls.py get_delta_channel_history()
  Reply: { cursor | nil, step, step, ... } with one step per ancestor that contributed
  something, nearest ancestor first:
    { {field, record, ...}, {position, value, ...} }
  the ancestor's writes to the channels still open (fields and records as in get_tuple, in no
  particular order), then for each channel that closes at this ancestor its position in
  ARGV[8..] (1 for ARGV[8]), its stored value "<type>\0<bytes>" and, for a value compressed
  against a base, the base's stored value (else false).
  The cursor is the id of the next ancestor to visit when the budget ran out with channels
  still open; nil when the walk is complete.
]]
-- requires: keyschema, refs, expiry, record, records, ledger

local K = keyspace(ARGV[1], ARGV[2])
local ns, id = ARGV[3], ARGV[4]
local budget, ttl = tonumber(ARGV[6]), tonumber(ARGV[7])
-- a thread exists while its root does (a delete hides it at once by moving the root away)
if redis.call("EXISTS", K.thread) == 0 then return { false } end
ttl = thread_ttl(K, ttl)

local position, by_enc, count = {}, {}, 0  -- open channels: raw name -> position in ARGV[8..]
for i = 8, #ARGV do
  local name = ARGV[i]
  if not position[name] then
    position[name] = i - 7
    by_enc[enc(name)] = name
    count = count + 1
  end
end

local cursor
if ARGV[5] == "1" then
  cursor = id
else
  if id == "" then
    local latest = redis.call("ZREVRANGE", KEYS[1], 0, 0)
    if #latest == 0 then return { false } end
    id = latest[1]
  end
  if redis.call("EXISTS", K.checkpoint(ns, id)) == 0 and redis.call("ZSCORE", KEYS[1], id)
      and record_evicted(K, ns, id) then
    return lost(K.checkpoint(ns, id), "checkpoint record")
  end
  cursor = record_field(K.checkpoint(ns, id), "p")  -- false: no target, or the root
end

local reply = { false }
local seen, visited = {}, 0
while cursor and count > 0 and not seen[cursor] do
  if visited >= budget then
    reply[1] = cursor
    break
  end
  local cp = K.checkpoint(ns, cursor)
  local rec = record(cp)
  if next(rec) == nil then
    -- an ancestor still indexed whose ledger says it should be there was evicted: the
    -- history would miss its writes (one that expired or was pruned ends the walk)
    if redis.call("ZSCORE", KEYS[1], cursor) and record_evicted(K, ns, cursor) then
      return lost(cp, "checkpoint record")
    end
    break
  end
  seen[cursor] = true
  visited = visited + 1

  local all, in_hash = checkpoint_writes(K, ns, cursor, rec)
  local writes = {}
  for j = 1, #all, 2 do
    if position[record_channel(all[j + 1])] then
      writes[#writes + 1] = all[j]
      writes[#writes + 1] = all[j + 1]
    end
  end

  local seeds = {}
  for _, ref in ipairs(value_refs(rec.bv)) do  -- (a base is not the channel's value)
    local name = by_enc[ref_channel(ref)]
    if name and position[name] then
      local key = K.blob(ns, ref)
      local value = redis.call("GET", key)
      local base = value and blob_base(value)
      local base_value = base and redis.call("GET", K.blob(ns, base))
      if value then  -- (a base that is gone fails the read on the client, loudly)
        seeds[#seeds + 1] = position[name]
        seeds[#seeds + 1] = value
        seeds[#seeds + 1] = base_value or false
        position[name] = nil
        count = count - 1
        keep_alive(key, ttl, false)
        if base then keep_alive(K.blob(ns, base), ttl, false) end
      end
    end
  end

  -- extended, never shortened (with ttl 0: made persistent): the chain must live as long as
  -- the checkpoints that are rebuilt from it, whichever saver wrote them
  keep_record_alive(K, ns, cursor, ttl)
  if in_hash then keep_alive(K.writes(ns, cursor), ttl, false) end
  if #writes > 0 or #seeds > 0 then reply[#reply + 1] = { writes, seeds } end
  cursor = rec.p
end
-- the index and the root outlive the records renewed above and their ledger entries: a
-- live ledger without its index is one whose index was evicted (records.lua's index_lost)
if visited > 0 then
  keep_alive(KEYS[1], ttl, false)
  keep_alive(K.thread, ttl, false)
end
return reply
