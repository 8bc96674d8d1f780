-- Checkpoint records (P:cp:{T}:N:I); inlined where a script says `-- @include record` (after
-- keyschema). Every read or write of a record's fields goes through these functions.
--
-- A record is one string: its fields one after the other, each as
--   <name> "\0" <length, decimal> "\0" <value>
-- A hash of a dozen fields, two of them longer than hash-max-listpack-value (ck, bv), is a
-- hashtable in Redis: about 1,700 bytes for 1,100 of fields, where the string takes about
-- 1,100. Records written before this layout are hashes with the same fields; they are read
-- as they are, and a put, a copy or a trim that writes one writes it as a string.

-- The fields of a string record, by name: all of them, or those in the set `wanted` (the
-- others are skipped unread: a record is mostly its checkpoint, which few callers need).
local function parse_record(packed, wanted)
  local fields, pos, size = {}, 1, #packed
  local left = -1  -- wanted fields not found yet (-1: all are wanted)
  if wanted then
    left = 0
    for _ in pairs(wanted) do left = left + 1 end
  end
  while pos <= size and left ~= 0 do
    local a = string.find(packed, "\0", pos, true)
    local b = string.find(packed, "\0", a + 1, true)
    local stop = b + tonumber(string.sub(packed, a + 1, b - 1))
    local name = string.sub(packed, pos, a - 1)
    if not wanted or wanted[name] then
      fields[name] = string.sub(packed, b + 1, stop)
      left = left - 1
    end
    pos = stop + 1
  end
  return fields
end

-- The string of a record from a flat list { name, value, name, value, ... }.
local function pack_record(flat)
  local parts = {}
  for j = 1, #flat, 2 do
    local value = flat[j + 1]
    parts[#parts + 1] = flat[j]
    parts[#parts + 1] = "\0"
    parts[#parts + 1] = #value
    parts[#parts + 1] = "\0"
    parts[#parts + 1] = value
  end
  return table.concat(parts)
end

-- A record's fields by name ({} when it does not exist), whatever its layout; `wanted`: as
-- for parse_record.
local function record(key, wanted)
  local packed = redis.pcall("GET", key)
  if type(packed) == "string" then return parse_record(packed, wanted) end
  if not packed then return {} end
  local flat = redis.call("HGETALL", key)  -- a record written as a hash
  local fields = {}
  for j = 1, #flat, 2 do fields[flat[j]] = flat[j + 1] end
  return fields
end

-- The named fields of a record, in order, false where absent: what HMGET replies.
local function record_fields(key, ...)
  local names, wanted = { ... }, {}
  for _, name in ipairs(names) do wanted[name] = true end
  local fields, out = record(key, wanted), {}
  for j, name in ipairs(names) do out[j] = fields[name] or false end
  return out
end

-- One field of a record, false when absent.
local function record_field(key, name)
  return record(key, { [name] = true })[name] or false
end

-- Write a record whole from a flat list { name, value, ... } (its expiry is the caller's).
local function write_record(key, flat)
  redis.call("SET", key, pack_record(flat))
end

-- Set one field of an existing record, keeping its expiry.
local function set_record_field(key, name, value)
  local fields = record(key)
  fields[name] = value
  local flat = {}
  for field, v in pairs(fields) do
    flat[#flat + 1] = field
    flat[#flat + 1] = v
  end
  redis.call("SET", key, pack_record(flat), "KEEPTTL")
end

-- A record as a flat list { name, value, ... } (what HGETALL replies).
local function record_flat(key)
  local flat = {}
  for field, value in pairs(record(key)) do
    flat[#flat + 1] = field
    flat[#flat + 1] = value
  end
  return flat
end
