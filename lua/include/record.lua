-- requires:
-- Checkpoint records (P:cp:{T}:N:I). Every read or write of a record's fields goes through these functions.
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
local LARGE_RANK = { md = 1, ck = 2 }  -- (see large_field_order)
-- How much of a record a reader of small fields takes first (GETRANGE).
local RECORD_HEAD = 1024
local RECORD_HEAD_LAST = "1023"  -- (GETRANGE's argument: a number would be printf'd each time)

-- A checkpoint's pending writes are fields of its record too, "w:<task id>:<idx>" (after
-- ck): a key per checkpoint with writes costs about 250 bytes of its own. Writes stored
-- before their checkpoint was (LangGraph may), or by an older version, are in the writes
-- hash (P:w, K.writes) and stay there: see checkpoint_writes().
local function is_write_field(name)
  return string.byte(name, 1) == 119 and string.byte(name, 2) == 58  -- "w:" (no new string)
end

local function is_large_field(name)
  return LARGE_FIELDS[name] or is_write_field(name)
end

-- The field that starts at byte `pos` of a record string: its name (nil when the string
-- ends before the name does), and the first and last byte of its value (nil when the header
-- is cut or not a header).
local function field_at(packed, pos)
  -- (one match, and the digits coerced by the arithmetic: each library call costs the server
  -- as much as a few dozen bytecodes)
  local name_length, value_length, name_first = string.match(packed, "^(%d+):(%d+):()", pos)
  if not name_first then return nil end
  local first = name_first + name_length
  local name = first - 1 <= #packed and string.sub(packed, name_first, first - 1) or nil
  return name, first, first + value_length - 1
end

-- The fields of a record string, by name: all of them, or those in the set `wanted` (the
-- others are skipped unread). `head`: the string is only the start of the record, so a field
-- cut off at its end ends the parse without an error (the caller reads the whole record).
-- `small`: no large field is wanted, so the parse ends at the first one (they come last).
-- Returns the fields and whether the parse reached every wanted field (or the end).
local function parse_record(packed, wanted, head, key, small)
  local fields, pos, size = {}, 1, #packed
  local left = -1  -- wanted fields not found yet (-1: all are wanted)
  if wanted then
    left = 0
    for _ in pairs(wanted) do left = left + 1 end
  end
  while pos <= size and left ~= 0 do
    local name, first, stop = field_at(packed, pos)
    if small and name and is_large_field(name) then return fields, true end
    if not stop or stop > size then
      if head then return fields, false end
      error("corrupt checkpoint record " .. key .. " at byte " .. pos)
    end
    if (not wanted or wanted[name]) and fields[name] == nil then
      fields[name] = string.sub(packed, first, stop)
      left = left - 1
    end
    pos = stop + 1
  end
  -- a head that ends where a field does is not the whole record (unless every wanted field
  -- was found)
  return fields, left == 0 or not head
end

local function pack_field(name, value)
  -- (%d: a number concatenated is printed with %.14g, which costs several times more)
  return string.format("%d:%d:", #name, #value) .. name .. value
end

-- The order of the large fields: md, ck, then the writes by name, so that the same fields
-- give the same string (a thread copied twice is the same bytes).
local function large_field_order(a, b)
  local rank_a, rank_b = LARGE_RANK[a] or 3, LARGE_RANK[b] or 3
  if rank_a ~= rank_b then return rank_a < rank_b end
  return a < b
end

-- The string of a record from a flat list { name, value, name, value, ... }, the small
-- fields first (in the list's order), then the large ones.
local function pack_record(flat)
  local parts, large, large_names = {}, {}, {}
  for j = 1, #flat, 2 do
    local name, value = flat[j], flat[j + 1]
    if is_large_field(name) then
      large_names[#large_names + 1] = name
      large[name] = value
    else
      parts[#parts + 1] = pack_field(name, value)
    end
  end
  table.sort(large_names, large_field_order)
  for _, name in ipairs(large_names) do parts[#parts + 1] = pack_field(name, large[name]) end
  return table.concat(parts)
end

-- The pending writes of a record string (name -> value), and the byte where the first of
-- them starts: they are its last fields.
local function split_writes(packed, key)
  local writes, start, pos, size = {}, nil, 1, #packed
  while pos <= size do
    local name, first, stop = field_at(packed, pos)
    if not stop or stop > size then
      error("corrupt checkpoint record " .. key .. " at byte " .. pos)
    end
    if is_write_field(name) then
      start = start or pos
      writes[name] = string.sub(packed, first, stop)
    end
    pos = stop + 1
  end
  return writes, start or size + 1
end

-- A record string with its pending writes (from byte `start` on: split_writes) replaced by
-- `writes` (name -> value): the fields before them byte for byte, then the writes as
-- pack_record orders them.
local function with_writes(packed, start, writes)
  local names = {}
  for name in pairs(writes) do names[#names + 1] = name end
  table.sort(names)
  local parts = { string.sub(packed, 1, start - 1) }
  for _, name in ipairs(names) do parts[#parts + 1] = pack_field(name, writes[name]) end
  return table.concat(parts)
end

-- A record's fields by name ({} when it does not exist), whatever its layout; `wanted`: a
-- set of names, or nil for all. Without ck or md among them, the head of the record is read
-- first, and the rest only when a wanted field lies beyond it.
local function record(key, wanted)
  local small = wanted and not wanted.ck and not wanted.md
  local packed
  if small then
    packed = redis.pcall("GETRANGE", key, "0", RECORD_HEAD_LAST)
  else
    packed = redis.pcall("GET", key)
  end
  if type(packed) == "string" then
    if packed == "" then return {} end  -- (GETRANGE of a missing key)
    if small and #packed == RECORD_HEAD then
      local fields, whole = parse_record(packed, wanted, true, key, small)
      if whole then return fields end
      packed = redis.call("GET", key)
    end
    return (parse_record(packed, wanted, false, key, small))
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

-- record_fields(), or nil when the record cannot be read: corrupt, of a layout no version
-- reads any more, or a key of another type. Deleting and checking must not stop at such a
-- record (a script that raises midway keeps what it wrote: Lua is not rolled back).
local function readable_record_fields(key, ...)
  local ok, fields = pcall(record_fields, key, ...)
  if ok then return fields end
  return nil
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

-- The pending writes of checkpoint `id` as a flat list { "<task id>:<idx>", write, ... } (what
-- HGETALL of a writes hash replies), those in its record and those in its writes hash, and
-- whether the hash has any. `fields`: the record's fields (all of them) when the caller has
-- them.
local function checkpoint_writes(K, ns, id, fields)
  local writes = redis.call("HGETALL", K.writes(ns, id))
  local in_hash = #writes > 0
  for name, value in pairs(fields or record(K.checkpoint(ns, id))) do
    if is_write_field(name) then
      writes[#writes + 1] = string.sub(name, 3)
      writes[#writes + 1] = value
    end
  end
  return writes, in_hash
end

-- The write records (values) of checkpoint `id`'s pending writes.
local function checkpoint_write_records(K, ns, id, fields)
  local writes, records = checkpoint_writes(K, ns, id, fields), {}
  for j = 2, #writes, 2 do records[#records + 1] = writes[j] end
  return records
end
