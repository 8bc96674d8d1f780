#!lua
--[[
  put_writes: store the pending writes of one task against one checkpoint, atomically.

  KEYS[1]  P:th:{T}         thread index (SET of namespaces), the thread's root
  KEYS[2]  P:wi:{T}:N       writes index (SET of checkpoint ids that have writes)
  KEYS[3]  P:w:{T}:N:I      the writes hash of the checkpoint (used when its record does not
                            exist yet, or is a hash, or the hash holds writes already; otherwise
                            the writes go into the record, as fields "w:<field>": see
                            is_write_field in include/record.lua)

  ARGV[1]  prefix P   ARGV[2]  hash tag {T}   ARGV[3]  namespace N (encoded)
  ARGV[4]  checkpoint id (raw)
  ARGV[5]  the saver's default ttl in seconds (0: none); the thread's own setting wins
  ARGV[6]  keep_last of the saver (0: none)
  then triples: field "<task id encoded>:<idx>", record, mode ("u" upsert | "f" first wins)
  A record is "<len path>:<len channel>:" .. path .. channel .. "<type>\0<bytes>"
  (lengths in bytes), so a script can read the channel without knowing the serializer.

  Counts: KEYS 3; ARGV 6+3n
  Built by: core/calls.py put_writes()
  Reply: the number of writes stored (first-wins writes that already existed are not
  counted; none for a checkpoint keep_last has trimmed already), or "REAPING" when an earlier delete, prune or copy of the thread left garbage to
  reap first (nothing written).

  With a ttl, the checkpoint the writes belong to is renewed with them (its hash, its blobs,
  the indexes): a superstep that runs longer than the ttl must not find the state it started
  from expired when it stores the next checkpoint. Without one, a checkpoint written with a
  ttl stops expiring too, as its writes never do.
]]
-- requires: replies, keyschema, expiry, record, indexes

-- A record takes the writes while it stays this small; beyond, they go into the writes hash:
-- each put_writes writes the record whole, and a fan-out of many tasks with large outputs
-- would copy it again and again.
local RECORD_WRITES_MAX = 16384

local K = keyspace(ARGV[1], ARGV[2])
if redis.call("EXISTS", K.gc) == 1 then return REAPING end
local ns, id = ARGV[3], ARGV[4]
-- With keep_last, writes that arrive for a checkpoint trimmed meanwhile (older than every
-- kept one, and gone) would be orphans: they are dropped.
if tonumber(ARGV[6]) > 0 and redis.call("EXISTS", K.checkpoint(ns, id)) == 0 then
  local oldest = redis.call("ZRANGE", K.index(ns), 0, 0)[1]
  if oldest and id < oldest then return 0 end
end
local ttl = thread_ttl(K, tonumber(ARGV[5]))
local cp = K.checkpoint(ns, id)
local stored = 0
local hash_existed = redis.call("EXISTS", KEYS[3]) == 1
local packed = not hash_existed and redis.pcall("GET", cp)
local in_record = false
if type(packed) == "string" then
  local size = #packed
  for i = 7, #ARGV, 3 do size = size + #ARGV[i] + #ARGV[i + 1] + 16 end
  -- the common case: the record has no pending writes yet (no field header ":w:" anywhere
  -- in it; a value that happens to hold one only takes the longer way): the writes are
  -- appended in name order, as pack_record orders them, and the record is not parsed
  local appended, names = {}, {}
  local fresh = size <= RECORD_WRITES_MAX and not string.find(packed, ":w:", 1, true)
  if fresh then
    for i = 7, #ARGV, 3 do
      local name = "w:" .. ARGV[i]
      if appended[name] then fresh = false break end
      appended[name] = ARGV[i + 1]
      names[#names + 1] = name
    end
    table.sort(names)
    for j, name in ipairs(names) do names[j] = pack_field(name, appended[name]) end
  end
  if fresh then
    in_record = true
    stored = #names
    redis.call("SET", cp, packed .. table.concat(names), "KEEPTTL")
    keep_alive(KEYS[1], ttl, false)
  elseif size <= RECORD_WRITES_MAX then
    -- into the record, after its other fields, as pack_record orders them
    in_record = true
    local writes, start = split_writes(packed, cp)
    local changed = false
    for i = 7, #ARGV, 3 do
      local name, value = "w:" .. ARGV[i], ARGV[i + 1]
      if writes[name] == nil or ARGV[i + 2] == "u" then
        stored = stored + 1
        if writes[name] ~= value then
          writes[name] = value
          changed = true
        end
      end
    end
    if changed then redis.call("SET", cp, with_writes(packed, start, writes), "KEEPTTL") end
    keep_alive(KEYS[1], ttl, false)
  else
    -- too large for the record: its writes move to the hash, where the others go
    local writes, start = split_writes(packed, cp)
    if start <= #packed then
      for name, value in pairs(writes) do
        redis.call("HSET", KEYS[3], string.sub(name, 3), value)
      end
      redis.call("SET", cp, string.sub(packed, 1, start - 1), "KEEPTTL")
    end
  end
end
if not in_record then
  -- into the writes hash: the record is not stored yet (or written by an older version, or
  -- too large)
  local writes_created = not hash_existed
  for i = 7, #ARGV, 3 do
    if ARGV[i + 2] == "u" then
      redis.call("HSET", KEYS[3], ARGV[i], ARGV[i + 1])
      stored = stored + 1
    else
      stored = stored + redis.call("HSETNX", KEYS[3], ARGV[i], ARGV[i + 1])
    end
  end
  local index_created = is_new(KEYS[2], ttl)
  redis.call("SADD", KEYS[2], id)
  local root_created = is_new(KEYS[1], ttl)
  redis.call("SADD", KEYS[1], ns)
  keep_alive(KEYS[3], ttl, writes_created)
  keep_alive(KEYS[2], ttl, index_created)
  keep_alive(KEYS[1], ttl, root_created)
end
-- The checkpoint lives at least as long as its writes: with a ttl it is renewed with them;
-- without one (the writes never expire) it stops expiring too, with what it needs.
local cp_left = redis.call("PTTL", cp)
if cp_left ~= -2 and (ttl > 0 or cp_left ~= -1) then
  local fields = record(cp, { bv = true, r = true, ix = true })
  keep_checkpoint_alive(K, ns, id, ttl, fields.bv, fields.r, fields.ix, cp_left)
end
-- drop writes index entries whose writes have expired, a couple per call (constant cost;
-- one without a ttl, as entries die by expiry). (Mostly there is no writes index: the writes
-- are in the record, and SRANDMEMBER of a missing key costs less than put_checkpoint's clock.)
for _, old in ipairs(redis.call("SRANDMEMBER", KEYS[2], ttl > 0 and "2" or "1")) do
  if old ~= id and redis.call("EXISTS", K.writes(ns, old)) == 0 then
    redis.call("SREM", KEYS[2], old)
  end
end
return stored
