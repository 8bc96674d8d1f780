-- Shared by every script; the loader inlines this file where a script says `-- @include keyschema`.
-- The Lua half of src/langgraph/checkpoint/rediskv/keys.py (read its docstring for the layout).
-- Every key is derived from the prefix and the thread's hash tag, so a script only ever touches
-- keys in the slot of the KEYS it was given.

-- Percent-encode one key part: keep A-Z a-z 0-9 - . _ ~, write every other byte as %XX.
local function enc(s)
  return (string.gsub(s, "[^%w%-%._~]", function(c)
    return string.format("%%%02X", string.byte(c))
  end))
end

local function keyspace(prefix, tag)
  local K = {}
  K.thread = prefix .. ":th:" .. tag
  K.runs = prefix .. ":runs:" .. tag
  K.ttl = prefix .. ":ttl:" .. tag
  function K.index(ns) return prefix .. ":idx:" .. tag .. ":" .. ns end
  function K.writes_index(ns) return prefix .. ":wi:" .. tag .. ":" .. ns end
  function K.checkpoint(ns, id) return prefix .. ":cp:" .. tag .. ":" .. ns .. ":" .. enc(id) end
  function K.writes(ns, id) return prefix .. ":w:" .. tag .. ":" .. ns .. ":" .. enc(id) end
  function K.blob(ns, ref) return prefix .. ":blob:" .. tag .. ":" .. ns .. ":" .. ref end
  function K.run(run) return prefix .. ":run:" .. tag .. ":" .. run end
  return K
end

-- Split "C1:V1,C2:V2" (the bv field) into its refs; encoded parts never contain ",".
local function split_refs(bv)
  local refs = {}
  if bv then
    for ref in string.gmatch(bv, "[^,]+") do refs[#refs + 1] = ref end
  end
  return refs
end

-- Give a key that was just written or read its expiry (ttl 0: none).
local function expire(key, ttl)
  if ttl > 0 then redis.call("EXPIRE", key, ttl) end
end

-- The expiry of one thread: its own setting (P:ttl:{T}, "0" when pinned) wins over the
-- saver's default. An active thread's own setting is refreshed with the rest of its keys.
local function thread_ttl(K, default)
  local own = redis.call("GET", K.ttl)
  if not own then return default end
  local ttl = tonumber(own)
  expire(K.ttl, ttl)
  return ttl
end
