#!lua
--[[
  put_checkpoint: store one checkpoint, its new channel values and every index entry, atomically.

  KEYS[1]  P:th:{T}         thread index (SET of namespaces)
  KEYS[2]  P:idx:{T}:N      namespace index (ZSET of checkpoint ids)
  KEYS[3]  P:cp:{T}:N:I     the checkpoint hash
  KEYS[4..] P:mi:<key>:<value>  the global metadata indexes the checkpoint goes into (only on
           a standalone server: these keys are not in the thread's cluster slot)

  ARGV[1]  prefix P                 ARGV[2]  hash tag {T}
  ARGV[3]  namespace N (encoded)    ARGV[4]  checkpoint id (raw)
  ARGV[5]  parent checkpoint id (raw, "" for none)
  ARGV[6]  checkpoint without channel values: "<type>\0<bytes>"
  ARGV[7]  metadata: "<type>\0<bytes>"
  ARGV[8]  blob refs of every channel with a value: "C:V,C:V,..."
  ARGV[9]  run id (encoded, "" for none)
  ARGV[10] the saver's default ttl in seconds (0 for none); the thread's own setting wins
  ARGV[11] ix: the "<key>:<value>" suffixes of KEYS[4..], comma-separated ("" for none)
  ARGV[12] m, the number of metadata filter fields, then m pairs: field "m:<key>", canonical JSON
  then b, the number of new blobs, then b pairs: ref "C:V", "<type>\0<bytes>"

  Reply: 1
]]
-- @include keyschema

local prefix, tag, ns, id = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local K = keyspace(prefix, tag)
local ttl = thread_ttl(K, tonumber(ARGV[10]))
local cp = KEYS[3]

-- Re-putting an id replaces it: drop the index entries of the record being replaced.
local old = redis.call("HMGET", cp, "r", "ix")
if old[1] then
  redis.call("SREM", K.run(old[1]), ns .. ":" .. id)
end
unindex_checkpoint(K, ns, id, old[2])
redis.call("DEL", cp)

-- the whole record in one HSET
local fields = { "ck", ARGV[6], "md", ARGV[7], "bv", ARGV[8] }
if ARGV[5] ~= "" then
  fields[#fields + 1] = "p"
  fields[#fields + 1] = ARGV[5]
end
local run = ARGV[9]
if run ~= "" then
  fields[#fields + 1] = "r"
  fields[#fields + 1] = run
  redis.call("SADD", K.runs, run)
  redis.call("SADD", K.run(run), ns .. ":" .. id)
  expire(K.run(run), ttl)
end
if ARGV[11] ~= "" then
  fields[#fields + 1] = "ix"
  fields[#fields + 1] = ARGV[11]
  local member = K.member(ns, id)
  for k = 4, #KEYS do
    local created = redis.call("EXISTS", KEYS[k]) == 0
    redis.call("ZADD", KEYS[k], 0, member)
    keep_index_key(KEYS[k], ttl, created)
    -- drop the oldest member when its checkpoint is gone: bounded at a constant cost
    local oldest = redis.call("ZRANGE", KEYS[k], 0, 0)[1]
    if oldest ~= member then
      local old_id, old_tag, old_ns = parse_member(oldest)
      if redis.call("EXISTS", keyspace(prefix, old_tag).checkpoint(old_ns, old_id)) == 0 then
        redis.call("ZREM", KEYS[k], oldest)
      end
    end
  end
end
local i = 12
local m = tonumber(ARGV[i])
for j = 1, 2 * m do fields[#fields + 1] = ARGV[i + j] end
for first = 1, #fields, 4000 do  -- unpack() has a limit of a few thousand values
  redis.call("HSET", cp, unpack(fields, first, math.min(first + 3999, #fields)))
end
i = i + 2 * m + 1
for j = 1, tonumber(ARGV[i]) do
  local blob = K.blob(ns, ARGV[i + 2 * j - 1])
  redis.call("SET", blob, ARGV[i + 2 * j])
  expire(blob, ttl)
end

redis.call("ZADD", KEYS[2], 0, id)
redis.call("SADD", KEYS[1], ns)

-- Index entries whose keys have expired are dropped a few at a time, oldest first, so the
-- indexes of a long-lived thread stay bounded at a constant cost per put.
for _, old in ipairs(redis.call("ZRANGE", KEYS[2], 0, 1)) do
  if old ~= id and redis.call("EXISTS", K.checkpoint(ns, old)) == 0 then
    redis.call("ZREM", KEYS[2], old)
  end
end
for _, old_run_id in ipairs(redis.call("SRANDMEMBER", K.runs, 2)) do
  if redis.call("EXISTS", K.run(old_run_id)) == 0 then redis.call("SREM", K.runs, old_run_id) end
end

if ttl > 0 then
  -- Everything the new checkpoint needs gets a fresh expiry: its own keys, the indexes, and
  -- every blob it references (also those written by earlier checkpoints), so a channel that
  -- has not changed for longer than the ttl survives as long as the thread stays active.
  for _, key in ipairs({ cp, KEYS[2], KEYS[1] }) do redis.call("EXPIRE", key, ttl) end
  for _, ref in ipairs(split_refs(ARGV[8])) do redis.call("EXPIRE", K.blob(ns, ref), ttl) end
  if redis.call("EXISTS", K.runs) == 1 then redis.call("EXPIRE", K.runs, ttl) end
end
return 1
