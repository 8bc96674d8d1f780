-- Checkpoint records (P:cp:{T}:N:I); inlined where a script says `-- @include record` (after
-- keyschema). Every read or write of a record's fields goes through these functions.
--
-- A record is one string: its fields one after the other, each as
--   <length of the name>:<length of the value>: <name> <value>
-- (decimal lengths, no spaces), so names and values may hold any byte (metadata keys are
-- the user's: "m:<key>"). The small fields come first and the checkpoint and its metadata
-- last (LARGE_FIELDS), so most readers read only the head of the record. A hash of a
-- dozen fields, two of them longer than hash-max-listpack-value (ck, bv), is a hashtable in
-- Redis: about 1,700 bytes for 1,100 of fields, where the string takes about 1,100. Records
-- written before this layout are hashes with the same fields; they are read as they are, and
-- a put, a copy, a trim or a reindex that writes one writes it as a string.

-- The fields written last: everything else is small and read often.
local LARGE_FIELDS = { md = true, ck = true }
-- How much of a record a reader of small fields takes first (GETRANGE).
local RECORD_HEAD = 1024

-- The fields of a record string, by name: all of them, or those in the set `wanted` (the
-- others are skipped unread). `head`: the string is only the start of the record, so a field
-- cut off at its end ends the parse without an error (the caller reads the whole record).
-- Returns the fields and whether the parse reached every wanted field (or the end).
local function parse_record(packed, wanted, head, key)
  local fields, pos, size = {}, 1, #packed
  local left = -1  -- wanted fields not found yet (-1: all are wanted)
  if wanted then
    left = 0
    for _ in pairs(wanted) do left = left + 1 end
  end
  while pos <= size and left ~= 0 do
    local a = string.find(packed, ":", pos, true)
    local b = a and string.find(packed, ":", a + 1, true)
    local name_length = a and tonumber(string.sub(packed, pos, a - 1))
    local value_length = b and tonumber(string.sub(packed, a + 1, b - 1))
    local stop = value_length and b + name_length + value_length
    if not stop or stop > size then
      if head then return fields, false end
      error("corrupt checkpoint record " .. key .. " at byte " .. pos)
    end
    local name = string.sub(packed, b + 1, b + name_length)
    if (not wanted or wanted[name]) and fields[name] == nil then
      fields[name] = string.sub(packed, b + name_length + 1, stop)
      left = left - 1
    end
    pos = stop + 1
  end
  return fields, true
end

-- The string of a record from a flat list { name, value, name, value, ... }, the small
-- fields first.
local function pack_record(flat)
  local parts, last = {}, {}
  for j = 1, #flat, 2 do
    local name, value = flat[j], flat[j + 1]
    local into = LARGE_FIELDS[name] and last or parts
    into[#into + 1] = #name .. ":" .. #value .. ":"
    into[#into + 1] = name
    into[#into + 1] = value
  end
  for _, part in ipairs(last) do parts[#parts + 1] = part end
  return table.concat(parts)
end

-- A record's fields by name ({} when it does not exist), whatever its layout; `wanted`: a
-- set of names, or nil for all. Without ck or md among them, the head of the record is read
-- first, and the rest only when a wanted field lies beyond it.
local function record(key, wanted)
  local small = wanted and not wanted.ck and not wanted.md
  local packed
  if small then
    packed = redis.pcall("GETRANGE", key, 0, RECORD_HEAD - 1)
  else
    packed = redis.pcall("GET", key)
  end
  if type(packed) == "string" then
    if packed == "" then return {} end  -- (GETRANGE of a missing key)
    if small and #packed == RECORD_HEAD then
      local fields, whole = parse_record(packed, wanted, true, key)
      if whole then return fields end
      packed = redis.call("GET", key)
    end
    return (parse_record(packed, wanted, false, key))
  end
  if not packed then return {} end
  -- a record written as a hash (the read above failed with WRONGTYPE)
  local fields = {}
  if wanted then
    local names = {}
    for name in pairs(wanted) do names[#names + 1] = name end
    if #names == 0 then return fields end
    local values = redis.call("HMGET", key, unpack(names))
    for j, name in ipairs(names) do fields[name] = values[j] or nil end
  else
    local flat = redis.call("HGETALL", key)
    for j = 1, #flat, 2 do fields[flat[j]] = flat[j + 1] end
  end
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

-- Fields by name as a flat list { name, value, ... } (what HGETALL replies).
local function flat_fields(fields)
  local flat = {}
  for field, value in pairs(fields) do
    flat[#flat + 1] = field
    flat[#flat + 1] = value
  end
  return flat
end

-- A record as a flat list { name, value, ... }.
local function record_flat(key)
  return flat_fields(record(key))
end

-- Set one field of an existing record, keeping its expiry.
local function set_record_field(key, name, value)
  local fields = record(key)
  fields[name] = value
  redis.call("SET", key, pack_record(flat_fields(fields)), "KEEPTTL")
end
