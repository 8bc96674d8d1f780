--[[
  put_writes: store the pending writes of one task against one checkpoint, atomically.

  KEYS[1]  P:th:{T}         thread index (SET of namespaces)
  KEYS[2]  P:wi:{T}:N       writes index (SET of checkpoint ids that have writes)
  KEYS[3]  P:w:{T}:N:I      the writes hash of the checkpoint

  ARGV[1]  namespace N (encoded)   ARGV[2]  checkpoint id (raw)   ARGV[3]  ttl seconds (0: none)
  then triples: field "<task id encoded>:<idx>", record, mode ("u" upsert | "f" first wins)
  A record is "<len path>:<len channel>:" .. path .. channel .. "<type>\0<bytes>"
  (lengths in bytes), so a script can read the channel without knowing the serializer.

  Reply: the number of writes stored (first-wins writes that already existed are not counted)
]]
local stored = 0
for i = 4, #ARGV, 3 do
  if ARGV[i + 2] == "u" then
    redis.call("HSET", KEYS[3], ARGV[i], ARGV[i + 1])
    stored = stored + 1
  else
    stored = stored + redis.call("HSETNX", KEYS[3], ARGV[i], ARGV[i + 1])
  end
end
redis.call("SADD", KEYS[2], ARGV[2])
redis.call("SADD", KEYS[1], ARGV[1])
local ttl = tonumber(ARGV[3])
if ttl > 0 then
  for _, key in ipairs(KEYS) do redis.call("EXPIRE", key, ttl) end
end
return stored
