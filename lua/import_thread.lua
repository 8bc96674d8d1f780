#!lua
--[[
  import_thread: write the records produced by export_thread.lua into a thread, with every
  index entry, atomically. Records already in the target with the same ids are replaced.

  KEYS[1]  P:th:{T}         thread index of the target (SET of namespaces)
  KEYS[2]  P:runs:{T}       run ids of the target

  ARGV[1]  prefix P   ARGV[2]  hash tag {T} of the target
  ARGV[3]  the saver's default ttl in seconds (0: none); the target's own setting wins
  ARGV[4..] the records, as export_thread.lua replies them

  Reply: the number of checkpoints written
]]
-- @include keyschema

local K = keyspace(ARGV[1], ARGV[2])
local ttl = thread_ttl(K, tonumber(ARGV[3]))
local written = 0
local i = 4
while i <= #ARGV do
  local kind, ns = ARGV[i], ARGV[i + 1]
  if kind == "b" then
    local key = K.blob(ns, ARGV[i + 2])
    redis.call("SET", key, ARGV[i + 3])
    expire(key, ttl)
    i = i + 4
  else
    local id, n = ARGV[i + 2], tonumber(ARGV[i + 3])
    local key = (kind == "c") and K.checkpoint(ns, id) or K.writes(ns, id)
    if kind == "c" then unindex_checkpoint(K, ns, id, redis.call("HGET", key, "ix")) end
    redis.call("DEL", key)
    for j = 0, n - 1 do
      local field, value = ARGV[i + 4 + 2 * j], ARGV[i + 5 + 2 * j]
      redis.call("HSET", key, field, value)
      if kind == "c" and field == "r" then
        redis.call("SADD", K.runs, value)
        redis.call("SADD", K.run(value), ns .. ":" .. id)
        expire(K.runs, ttl)
        expire(K.run(value), ttl)
      elseif kind == "c" and field == "ix" then
        -- the copy joins the global metadata indexes the source checkpoint is in
        for _, suffix in ipairs(split_refs(value)) do
          local index = K.metadata_index(suffix)
          local created = redis.call("EXISTS", index) == 0
          redis.call("ZADD", index, 0, K.member(ns, id))
          keep_index_key(index, ttl, created)
        end
      end
    end
    expire(key, ttl)
    if kind == "c" then
      redis.call("ZADD", K.index(ns), 0, id)
      expire(K.index(ns), ttl)
      written = written + 1
    else
      redis.call("SADD", K.writes_index(ns), id)
      expire(K.writes_index(ns), ttl)
    end
    redis.call("SADD", KEYS[1], ns)
    i = i + 4 + 2 * n
  end
end
expire(KEYS[1], ttl)
return written
