#!lua flags=allow-oom
--[[
  set_thread_ttl: give one thread its own expiry, pin it (never expires), or return it to the
  saver's default; every key the thread has gets the new expiry now.

  KEYS[1]  P:th:{T}         thread index (SET of namespaces)
  KEYS[2]  P:runs:{T}       run ids of the thread
  KEYS[3]  P:ttl:{T}        the thread's own setting

  ARGV[1]  prefix P   ARGV[2]  hash tag {T}
  ARGV[3]  mode: "own" (ARGV[4] seconds; 0 pins the thread) | "default" (forget the thread's
           own setting; ARGV[4] is the saver's default, 0 for none)
  ARGV[4]  seconds

  Reply: the number of keys whose expiry was set
]]
-- @include keyschema

local K = keyspace(ARGV[1], ARGV[2])
local mode, ttl = ARGV[3], tonumber(ARGV[4])
if mode == "own" then
  redis.call("SET", KEYS[3], ttl)
else
  redis.call("DEL", KEYS[3])
end

local touched = 0
local function apply(key)
  if redis.call("EXISTS", key) == 0 then return end
  if ttl > 0 then redis.call("EXPIRE", key, ttl) else redis.call("PERSIST", key) end
  touched = touched + 1
end

for _, ns in ipairs(redis.call("SMEMBERS", KEYS[1])) do
  local refs = {}
  for _, id in ipairs(redis.call("ZRANGE", K.index(ns), 0, -1)) do
    local cp = K.checkpoint(ns, id)
    local fields = redis.call("HMGET", cp, "bv", "ix")
    for _, ref in ipairs(split_refs(fields[1])) do refs[ref] = true end
    for _, suffix in ipairs(split_refs(fields[2])) do
      local index = K.metadata_index(suffix)
      if ttl > 0 and redis.call("PTTL", index) == -1 then
        -- kept forever for this thread until now; other pinned threads in it come back into
        -- it with their next checkpoint
        redis.call("EXPIRE", index, ttl)
      else
        keep_index_key(index, ttl, false)  -- it must outlive the checkpoint
      end
    end
    apply(cp)
  end
  for _, id in ipairs(redis.call("SMEMBERS", K.writes_index(ns))) do apply(K.writes(ns, id)) end
  for ref in pairs(refs) do apply(K.blob(ns, ref)) end
  apply(K.index(ns))
  apply(K.writes_index(ns))
end
for _, run in ipairs(redis.call("SMEMBERS", KEYS[2])) do apply(K.run(run)) end
apply(KEYS[2])
apply(KEYS[1])
if mode == "own" and ttl > 0 then redis.call("EXPIRE", KEYS[3], ttl) end
return touched
