--[[
  put_checkpoint: store one checkpoint, its new channel values and every index entry, atomically.

  KEYS[1]  P:th:{T}         thread index (SET of namespaces)
  KEYS[2]  P:idx:{T}:N      namespace index (ZSET of checkpoint ids)
  KEYS[3]  P:cp:{T}:N:I     the checkpoint hash

  ARGV[1]  prefix P                 ARGV[2]  hash tag {T}
  ARGV[3]  namespace N (encoded)    ARGV[4]  checkpoint id (raw)
  ARGV[5]  parent checkpoint id (raw, "" for none)
  ARGV[6]  checkpoint without channel values: "<type>\0<bytes>"
  ARGV[7]  metadata: "<type>\0<bytes>"
  ARGV[8]  blob refs of every channel with a value: "C:V,C:V,..."
  ARGV[9]  run id (encoded, "" for none)
  ARGV[10] ttl in seconds (0 for none)
  ARGV[11] m, the number of metadata filter fields, then m pairs: field "m:<key>", canonical JSON
  then b, the number of new blobs, then b pairs: ref "C:V", "<type>\0<bytes>"

  Reply: 1
]]
-- @include keyschema

local prefix, tag, ns, id = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local ttl = tonumber(ARGV[10])
local K = keyspace(prefix, tag)
local cp = KEYS[3]

-- Re-putting an id replaces it: drop the run index entry of the record being replaced.
local old_run = redis.call("HGET", cp, "r")
if old_run then
  redis.call("SREM", K.run(old_run), ns .. ":" .. id)
end
redis.call("DEL", cp)

redis.call("HSET", cp, "ck", ARGV[6], "md", ARGV[7], "bv", ARGV[8])
if ARGV[5] ~= "" then redis.call("HSET", cp, "p", ARGV[5]) end
local run = ARGV[9]
if run ~= "" then
  redis.call("HSET", cp, "r", run)
  redis.call("SADD", K.runs, run)
  redis.call("SADD", K.run(run), ns .. ":" .. id)
  expire(K.runs, ttl)
  expire(K.run(run), ttl)
end

local i = 11
local m = tonumber(ARGV[i])
for j = 1, m do
  redis.call("HSET", cp, ARGV[i + 2 * j - 1], ARGV[i + 2 * j])
end
i = i + 2 * m + 1
local b = tonumber(ARGV[i])
for j = 1, b do
  local blob = K.blob(ns, ARGV[i + 2 * j - 1])
  redis.call("SET", blob, ARGV[i + 2 * j])
end

redis.call("ZADD", KEYS[2], 0, id)
redis.call("SADD", KEYS[1], ns)

if ttl > 0 then
  -- Everything the new checkpoint needs gets a fresh expiry: its own keys, the indexes, and
  -- every blob it references (also those written by earlier checkpoints), so a channel that
  -- has not changed for longer than the ttl survives as long as the thread stays active.
  for _, key in ipairs({ cp, KEYS[2], KEYS[1] }) do redis.call("EXPIRE", key, ttl) end
  for _, ref in ipairs(split_refs(ARGV[8])) do redis.call("EXPIRE", K.blob(ns, ref), ttl) end
end
return 1
