#!lua flags=allow-oom
--[[
  list_checkpoints: one page of a thread's checkpoints, newest first, filtered on the server.

  KEYS[1]  P:th:{T}         thread index (SET of namespaces), the thread's root
  KEYS[2]  P:alive          the registry of live threads (include/registry.lua), with modes
                            "0u" and "1u" on a standalone server only: outside the slot

  ARGV[1]  prefix P   ARGV[2]  hash tag {T}
  ARGV[3]  "0": the namespace in ARGV[4]; "1": every namespace of the thread, unless it has
           more than ARGV[4] (then the reply lists them, for the client to list them in
           chunks and merge); "2": the namespaces (encoded) after the filter pairs; "0u",
           "1u": as "0", "1", and the reply is 0 when no key of the thread is left (the first
           page of a list() of one thread)
  ARGV[4]  namespace N (encoded), or for "1" the most namespaces one call merges
  ARGV[5]  only this checkpoint id (raw), "" for any
  ARGV[6]  before: only ids lexically below this one (raw), "" for no bound
  ARGV[7]  page size: at most this many checkpoints are returned; negative: that many, as
           { ns, id } only (the heads a client merging many threads keeps, see core/merge.py)
  ARGV[8]  scan budget: at most this many ids are examined in all, so that a selective filter
           over a long history never blocks the server for long
  ARGV[9]  f, the number of metadata filter pairs, then f pairs: field "m:<key>", canonical JSON
  then (mode "2") the namespaces (encoded) to list

  Counts: KEYS 1..2; ARGV 9..
  Built by: core/calls.py list_checkpoints()
  Reply: 0 (modes "0u", "1u" without KEYS[2]) when no key of the thread is left
  (include/ledger.lua's missing_root: the client asks thread_deadlines.lua whether it was
  due); with KEYS[2], an error "LOST P:th:{T} thread due <deadline>" when the registry
  holds such a thread as due (include/records.lua's untraced), else an empty page;
  { "NAMESPACES", ns, ns, ... } (mode "1" on a thread with too many), or
  { cursor | nil, record, record, ... } where each record is laid out as in get_tuple.
  The cursor is the `before` to pass for the next page: every id above it has been examined;
  nil means there is nothing more. The namespaces are merged newest first (a heap of their
  next ids), so the cursor is exact however many namespaces the thread has, and each call
  examines at most the budget plus one id per namespace. Index entries whose checkpoint has
  expired are removed on the way. A checkpoint that lost a blob (a blob expires with its
  record or after it: evicted), or a thread that lost its root, is an error "LOST <key>
  <what>" (include/records.lua's lost()), never a shorter history.
]]
-- requires: replies, keyschema, record, records, drop, ledger

local K = keyspace(ARGV[1], ARGV[2])
local only_id, before = ARGV[5], ARGV[6]
local page, budget = tonumber(ARGV[7]), tonumber(ARGV[8])
local ids_only = page < 0
if ids_only then page = -page end
local nfilter = tonumber(ARGV[9])
local mode, first_page = string.sub(ARGV[3], 1, 1), string.sub(ARGV[3], 2) == "u"
-- a thread exists while its root does: a delete hides it at once by moving the root away
if redis.call("EXISTS", KEYS[1]) == 0 then
  -- a key the root leads to without the root, and no delete under way: the root was evicted
  local ns = mode == "0" and ARGV[4] or ""
  local why = mode ~= "2" and missing_root(K, ns)
  if why == "evicted" then return lost(KEYS[1], "thread root") end
  if why == "untraced" and first_page then return untraced(K, KEYS[2], { false }) end
  return { false }
end

local namespaces
if mode == "1" then
  if only_id == "" and redis.call("SCARD", KEYS[1]) > tonumber(ARGV[4]) then
    local reply = redis.call("SMEMBERS", KEYS[1])
    table.insert(reply, 1, NAMESPACES)
    return reply
  end
  namespaces = redis.call("SMEMBERS", KEYS[1])
elseif mode == "2" then
  namespaces = {}
  for i = 10 + 2 * nfilter, #ARGV do namespaces[#namespaces + 1] = ARGV[i] end
else
  namespaces = { ARGV[4] }
end

-- A checkpoint that may be listed: still stored and matching the filter (load_checkpoint then
-- refuses one that is incomplete).
local function listable(ns, id)
  local cp = K.checkpoint(ns, id)
  if redis.call("EXISTS", cp) == 0 then
    -- missing while its ledger says it should be there: evicted, not expired; listed by id
    -- (a read of it by id says so), else an error rather than a history with a hole
    if record_evicted(K, ns, id) then
      if ids_only then return "lost" end
      return false, lost(cp, "checkpoint record")
    end
    redis.call("ZREM", K.index(ns), id)  -- the checkpoint expired: drop its dangling entry
    drop_entry(K, ns, id)
    -- an index emptied so is forgotten with its namespace, not taken for one evicted later
    if redis.call("EXISTS", K.index(ns)) == 0 then forget_empty_namespace(K, ns, true) end
    return false
  end
  return matches_filter(cp, ARGV, 10, nfilter)
end

local reply = { false }
if only_id ~= "" then
  if before == "" or only_id < before then
    for _, ns in ipairs(namespaces) do
      if #reply > page then break end
      local ok, err = false, nil
      if redis.call("ZSCORE", K.index(ns), only_id) then ok, err = listable(ns, only_id) end
      if err then return err end
      if ok == "lost" then return lost(K.checkpoint(ns, only_id), "checkpoint record") end
      if ok then
        local record, missing = load_checkpoint(K, ns, only_id, 0)
        if missing then return lost(missing, "value") end
        reply[#reply + 1] = record
      end
    end
  end
  return reply
end

-- Each namespace streams its ids newest first from a buffer refilled from its index.
local fetch = (nfilter > 0) and 128 or math.min(page, 128)
local streams = {}
local function refill(s, n)
  s.ids = redis.call("ZREVRANGEBYLEX", K.index(s.ns), s.upper, "-", "LIMIT", 0, n)
  s.pos = 1
  s.last_batch = #s.ids < n
  if #s.ids > 0 then s.upper = "(" .. s.ids[#s.ids] end
end

-- a binary max-heap of streams, keyed by their current id
local heap = {}
local function above(a, b) return heap[a].ids[heap[a].pos] > heap[b].ids[heap[b].pos] end
local function push(s)
  heap[#heap + 1] = s
  local i = #heap
  while i > 1 and above(i, math.floor(i / 2)) do
    local p = math.floor(i / 2)
    heap[i], heap[p] = heap[p], heap[i]
    i = p
  end
end
local function pop()
  local top = heap[1]
  heap[1] = heap[#heap]
  heap[#heap] = nil
  local i = 1
  while true do
    local l, r, best = 2 * i, 2 * i + 1, i
    if l <= #heap and above(l, best) then best = l end
    if r <= #heap and above(r, best) then best = r end
    if best == i then break end
    heap[i], heap[best] = heap[best], heap[i]
    i = best
  end
  return top
end

local upper = (before ~= "") and ("(" .. before) or "+"
local first_fetch = (#namespaces > 16) and 1 or fetch  -- many namespaces: heads first
for _, ns in ipairs(namespaces) do
  local s = { ns = ns, upper = upper }
  refill(s, first_fetch)
  if #s.ids > 0 then
    push(s)
  elseif before == "" then
    -- the root names the namespace but its index is gone: evicted (as in get_tuple.lua)
    if index_lost(K, ns) then return lost(K.index(ns), "checkpoint index") end
    forget_empty_namespace(K, ns, true)  -- when everything of this namespace has expired
  end
end

local taken, examined, last = 0, 0, nil
while #heap > 0 and taken < page and examined < budget do
  local s = pop()
  local id = s.ids[s.pos]
  examined = examined + 1
  last = id
  local ok, err = listable(s.ns, id)
  if err then return err end
  if ok == "lost" then  -- ids only: a read of it by id says it is lost
    reply[#reply + 1] = { s.ns, id }
    taken = taken + 1
  elseif ok then
    -- (an id only may name a checkpoint whose blobs are gone: its stream is read again; not
    -- one keep_last hides, field h, which load_checkpoint refuses: a client choosing ids
    -- would choose again past each of them)
    local record, missing
    if not ids_only then
      record, missing = load_checkpoint(K, s.ns, id, 0)
      if missing then return lost(missing, "value") end
    else
      local fields = readable_record_fields(K.checkpoint(s.ns, id), "h")
      -- (unreadable: listed; a read of it names the record)
      if not (fields and fields[1]) then record = { s.ns, id } end
    end
    if record then
      reply[#reply + 1] = record
      taken = taken + 1
    end
  end
  s.pos = s.pos + 1
  if s.pos > #s.ids and not s.last_batch then refill(s, fetch) end
  if s.pos <= #s.ids then push(s) end
end
if #heap > 0 and last then reply[1] = last end
return reply
