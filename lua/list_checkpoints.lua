#!lua flags=allow-oom
--[[
  list_checkpoints: one page of a thread's checkpoints, newest first, filtered on the server.

  KEYS[1]  P:th:{T}         thread index (SET of namespaces)

  ARGV[1]  prefix P   ARGV[2]  hash tag {T}
  ARGV[3]  "1" to search every namespace of the thread, "0" for the one in ARGV[4]
  ARGV[4]  namespace N (encoded)
  ARGV[5]  only this checkpoint id (raw), "" for any
  ARGV[6]  before: only ids lexically below this one (raw), "" for no bound
  ARGV[7]  page size: at most this many checkpoints are returned
  ARGV[8]  scan budget: at most this many ids are examined per namespace, so that a selective
           filter over a long history never blocks the server for long
  ARGV[9]  f, the number of metadata filter pairs, then f pairs: field "m:<key>", canonical JSON

  Reply: { cursor | nil, record, record, ... } where each record is laid out as in get_tuple.
  The cursor is the `before` to pass for the next page; nil means there is nothing more.
  Index entries whose checkpoint has expired are removed on the way; incomplete checkpoints
  (a blob expired) are skipped.
]]
-- @include keyschema
-- @include records

local K = keyspace(ARGV[1], ARGV[2])
local only_id, before = ARGV[5], ARGV[6]
local page, budget = tonumber(ARGV[7]), tonumber(ARGV[8])
local nfilter = tonumber(ARGV[9])

local namespaces
if ARGV[3] == "1" then
  namespaces = redis.call("SMEMBERS", KEYS[1])
else
  namespaces = { ARGV[4] }
end

local found = {}   -- { id, ns } of matching checkpoints, at most `page` per namespace
local bound = nil  -- highest id where a namespace stopped early: below it we know nothing
for _, ns in ipairs(namespaces) do
  local index = K.index(ns)
  local upper = (before ~= "") and ("(" .. before) or "+"
  local taken, scanned, exhausted, last = 0, 0, false, nil
  if only_id ~= "" then
    exhausted = true
    local inside = before == "" or only_id < before
    if inside and redis.call("ZSCORE", index, only_id)
        and matches_filter(K.checkpoint(ns, only_id), 10, nfilter) then
      found[#found + 1] = { only_id, ns }
    end
  end
  while not exhausted and taken < page and scanned < budget do
    local want = (nfilter > 0) and 128 or (page - taken)
    if want > budget - scanned then want = budget - scanned end
    local ids = redis.call("ZREVRANGEBYLEX", index, upper, "-", "LIMIT", 0, want)
    for _, id in ipairs(ids) do
      scanned = scanned + 1
      last = id
      local cp = K.checkpoint(ns, id)
      if redis.call("EXISTS", cp) == 0 then
        redis.call("ZREM", index, id)  -- the checkpoint expired: drop its dangling entry
      elseif matches_filter(cp, 10, nfilter) then
        taken = taken + 1
        found[#found + 1] = { id, ns }
        if taken >= page then break end
      end
    end
    if #ids < want then exhausted = true end
    if last then upper = "(" .. last end
  end
  if not exhausted and last and (bound == nil or last > bound) then
    bound = last
  end
end

table.sort(found, function(a, b)
  if a[1] ~= b[1] then return a[1] > b[1] end
  return a[2] < b[2]
end)

local reply = { false }
local count = 0
for _, hit in ipairs(found) do
  if count >= page or (bound and hit[1] < bound) then break end
  local record = load_checkpoint(K, hit[2], hit[1], 0)
  if record then
    reply[#reply + 1] = record
    count = count + 1
  end
end
for _, ns in ipairs(namespaces) do
  if redis.call("EXISTS", K.index(ns), K.writes_index(ns)) == 0 then
    redis.call("SREM", KEYS[1], ns)  -- everything of this namespace has expired
  end
end
if count >= page then
  reply[1] = reply[#reply][2]
elseif bound then
  reply[1] = bound
end
return reply
