#!lua
--[[
  put_writes: store the pending writes of one task against one checkpoint, atomically.

  KEYS[1]  P:th:{T}         thread index (SET of namespaces), the thread's root
  KEYS[2]  P:wi:{T}:N       writes index (SET of checkpoint ids that have writes)
  KEYS[3]  P:w:{T}:N:I      the writes hash of the checkpoint

  ARGV[1]  prefix P   ARGV[2]  hash tag {T}   ARGV[3]  namespace N (encoded)
  ARGV[4]  checkpoint id (raw)
  ARGV[5]  the saver's default ttl in seconds (0: none); the thread's own setting wins
  ARGV[6]  keep_last of the saver (0: none)
  then triples: field "<task id encoded>:<idx>", record, mode ("u" upsert | "f" first wins)
  A record is "<len path>:<len channel>:" .. path .. channel .. "<type>\0<bytes>"
  (lengths in bytes), so a script can read the channel without knowing the serializer.

  Reply: the number of writes stored (first-wins writes that already existed are not
  counted; none for a checkpoint keep_last has trimmed already), or "REAPING" when an earlier delete, prune or copy of the thread left garbage to
  reap first (nothing written).

  With a ttl, the checkpoint the writes belong to is renewed with them (its hash, its blobs,
  the indexes): a superstep that runs longer than the ttl must not find the state it started
  from expired when it stores the next checkpoint. Without one, a checkpoint written with a
  ttl stops expiring too, as its writes never do.
]]
-- @include keyschema
-- @include record

local K = keyspace(ARGV[1], ARGV[2])
if redis.call("EXISTS", K.gc) == 1 then return "REAPING" end
local ns, id = ARGV[3], ARGV[4]
-- With keep_last, writes that arrive for a checkpoint trimmed meanwhile (older than every
-- kept one, and gone) would be orphans: they are dropped.
if tonumber(ARGV[6]) > 0 and redis.call("EXISTS", K.checkpoint(ns, id)) == 0 then
  local oldest = redis.call("ZRANGE", K.index(ns), 0, 0)[1]
  if oldest and id < oldest then return 0 end
end
local ttl = thread_ttl(K, tonumber(ARGV[5]))
local stored = 0
local writes_created = is_new(KEYS[3], ttl)
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
-- The checkpoint lives at least as long as its writes: with a ttl it is renewed with them;
-- without one (the writes never expire) it stops expiring too, with what it needs.
local cp = K.checkpoint(ns, id)
local cp_left = redis.call("PTTL", cp)
if cp_left ~= -2 and (ttl > 0 or cp_left ~= -1) then
  local fields = record_fields(cp, "bv", "r", "ix")
  keep_checkpoint_alive(K, ns, id, ttl, fields[1], fields[2], fields[3], cp_left)
end
-- drop writes index entries whose writes have expired, a couple per call (constant cost;
-- one without a ttl, as entries die by expiry)
for _, old in ipairs(redis.call("SRANDMEMBER", KEYS[2], ttl > 0 and 2 or 1)) do
  if old ~= id and redis.call("EXISTS", K.writes(ns, old)) == 0 then
    redis.call("SREM", KEYS[2], old)
  end
end
return stored
