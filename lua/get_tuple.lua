#!lua flags=allow-oom
--[[
  get_tuple: one checkpoint (the latest of its namespace, or a given id) with its channel
  values and pending writes.

  KEYS[1]  P:idx:{T}:N      namespace index (ZSET of checkpoint ids)

  ARGV[1]  prefix P   ARGV[2]  hash tag {T}   ARGV[3]  namespace N (encoded)
  ARGV[4]  checkpoint id (raw), "" for the latest
  ARGV[5]  refresh on read: the saver's default ttl in seconds (the thread's own setting
           wins), or -1 to leave expiries alone

  Reply: nil when there is no such checkpoint, else
    { ns, id, checkpoint, metadata, parent id | nil, {ref, value, ...}, {field, record, ...} }
]]
-- @include keyschema
-- @include records

local K = keyspace(ARGV[1], ARGV[2])
local ns, id = ARGV[3], ARGV[4]
local ttl = tonumber(ARGV[5])
if ttl >= 0 then ttl = thread_ttl(K, ttl) else ttl = 0 end
if id == "" then
  local latest = redis.call("ZREVRANGE", KEYS[1], 0, 0)
  if #latest == 0 then return nil end
  id = latest[1]
end
local record = load_checkpoint(K, ns, id, ttl)
if record and ttl > 0 then
  redis.call("EXPIRE", KEYS[1], ttl)
  redis.call("EXPIRE", K.thread, ttl)
  if redis.call("EXISTS", K.writes_index(ns)) == 1 then
    redis.call("EXPIRE", K.writes_index(ns), ttl)
  end
end
return record
