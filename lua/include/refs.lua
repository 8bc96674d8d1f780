-- requires:
-- Blob refs and bases: the parts of a record's bv (and ix) field, the channel of a ref or of a
-- write record, and the base a stored blob was compressed against.

-- SADD every member of `members` to `key`, 4,000 at a time: unpack() fails beyond about 8,000
-- values ("too many results to unpack"), and a record, a run list or a namespace list may
-- hold more.
local function add_members(key, members)
  for first = 1, #members, 4000 do
    redis.call("SADD", key, unpack(members, first, math.min(first + 3999, #members)))
  end
end

-- Split "C1:V1,C2:V2" (the bv field, also the ix field) into its parts, skipping empty ones;
-- encoded parts never contain ",". (A plain find: gmatch's character class costs more.)
local function split_refs(bv)
  local refs, n, pos = {}, 0, 1
  if not bv then return refs end
  local size = #bv
  while pos <= size do
    local comma = string.find(bv, ",", pos, true) or size + 1
    if comma > pos then
      n = n + 1
      refs[n] = string.sub(bv, pos, comma - 1)
    end
    pos = comma + 1
  end
  return refs
end

-- The channel of a write record: "<len path>:<len channel>:" .. path .. channel .. value.
local function record_channel(record)
  local a = string.find(record, ":", 1, true)
  local b = string.find(record, ":", a + 1, true)
  local path_len = tonumber(string.sub(record, 1, a - 1))
  local channel_len = tonumber(string.sub(record, a + 1, b - 1))
  local first = b + 1 + path_len
  return string.sub(record, first, first + channel_len - 1)
end

-- The encoded channel of a blob ref "C:V".
local function ref_channel(ref)
  return string.sub(ref, 1, string.find(ref, ":", 1, true) - 1)
end

-- The ref of the base a stored blob was compressed against, for a blob stored
-- "zr:<base ref>;<type>\0<bytes>" (src/langgraph/checkpoint/rediskv/compression.py), or nil
-- for one stored in full. A record that references such a blob references its base too.
local function blob_base(stored)
  if string.sub(stored, 1, 3) ~= "zr:" then return nil end
  local semi = string.find(stored, ";", 4, true)
  return semi and string.sub(stored, 4, semi - 1) or nil
end

-- Whether the blob at `key` is stored with `mark` ("u:b:<digest>;", the head of a value that
-- may serve as a base: compression.py), so holds the very bytes of the client's that bear it;
-- only the head is read, whatever the blob's size (false when it is gone).
local function has_mark(key, mark)
  return redis.call("GETRANGE", key, "0", tostring(#mark - 1)) == mark
end

-- blob_base of the blob at `key` ("" when gone), reading only the head of the value.
local function stored_base(key)
  local head = redis.call("GETRANGE", key, "0", "255")  -- (strings: a number is printf'd)
  if string.sub(head, 1, 3) == "zr:" and not string.find(head, ";", 4, true) then
    head = redis.call("GET", key) or ""  -- a base ref longer than the head
  end
  return blob_base(head)
end

-- A record's bv field lists the refs of its values ("C:V,C:V"), then ",," and the refs of the
-- bases some of them are stored against ("C:V,C:V,,C:V"); split_refs() reads both parts as
-- one list (it skips the empty item), so whatever keeps, renews, copies or removes a record's
-- blobs does it to the bases too. The ",," is there, bases or not, when the list of bases is
-- complete (a record of this version); a record without it was written before bases existed.

-- The refs of a record's values (its bv without the bases).
local function value_refs(bv)
  local cut = bv and string.find(bv, ",,", 1, true)
  return split_refs(cut and string.sub(bv, 1, cut - 1) or bv)
end

-- Whether bv lists ref (in either part).
local function has_ref(bv, ref)
  return string.find("," .. bv .. ",", "," .. ref .. ",", 1, true) ~= nil
end

-- bv with one more base (and the ",," in any case).
local function with_base(bv, base)
  if string.sub(bv, -2) == ",," then return bv .. base end
  return bv .. (string.find(bv, ",,", 1, true) and "," or ",,") .. base
end

-- A record's bv with the base of each of its values that is stored against one it does not
-- list yet, and those bases (a copied record: the target's stored values may have other bases
-- than the source's).
local function with_stored_bases(K, ns, bv)
  local added = {}
  for _, ref in ipairs(value_refs(bv)) do
    local base = stored_base(K.blob(ns, ref))
    if base and not has_ref(bv, base) then
      bv = with_base(bv, base)
      added[#added + 1] = base
    end
  end
  if not string.find(bv, ",,", 1, true) then bv = bv .. ",," end
  return bv, added
end
