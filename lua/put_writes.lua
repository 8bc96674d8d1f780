#!lua
--[[
  put_writes: store the pending writes of one task against one checkpoint, atomically.

  KEYS[1]  P:th:{T}         thread index (SET of namespaces)
  KEYS[2]  P:wi:{T}:N       writes index (SET of checkpoint ids that have writes)
  KEYS[3]  P:w:{T}:N:I      the writes hash of the checkpoint

  ARGV[1]  prefix P   ARGV[2]  hash tag {T}   ARGV[3]  namespace N (encoded)
  ARGV[4]  checkpoint id (raw)
  ARGV[5]  the saver's default ttl in seconds (0: none); the thread's own setting wins
  then triples: field "<task id encoded>:<idx>", record, mode ("u" upsert | "f" first wins)
  A record is "<len path>:<len channel>:" .. path .. channel .. "<type>\0<bytes>"
  (lengths in bytes), so a script can read the channel without knowing the serializer.

  Reply: the number of writes stored (first-wins writes that already existed are not counted)
]]
-- @include keyschema

local K = keyspace(ARGV[1], ARGV[2])
local ns, id = ARGV[3], ARGV[4]
local ttl = thread_ttl(K, tonumber(ARGV[5]))
local stored = 0
for i = 6, #ARGV, 3 do
  if ARGV[i + 2] == "u" then
    redis.call("HSET", KEYS[3], ARGV[i], ARGV[i + 1])
    stored = stored + 1
  else
    stored = stored + redis.call("HSETNX", KEYS[3], ARGV[i], ARGV[i + 1])
  end
end
redis.call("SADD", KEYS[2], id)
redis.call("SADD", KEYS[1], ns)
-- drop writes index entries whose writes have expired, a couple per call (constant cost)
for _, old in ipairs(redis.call("SRANDMEMBER", KEYS[2], 2)) do
  if old ~= id and redis.call("EXISTS", K.writes(ns, old)) == 0 then
    redis.call("SREM", KEYS[2], old)
  end
end
if ttl > 0 then
  for _, key in ipairs(KEYS) do redis.call("EXPIRE", key, ttl) end
end
return stored
