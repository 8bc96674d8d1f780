-- requires:
-- The key schema: the name of every key, derived from the prefix and the thread's hash tag,
-- so a script only ever touches keys in the slot of the KEYS it was given. The Lua half of
-- src/langgraph/checkpoint/rediskv/keys.py (read its docstring for the layout).

-- Percent-encode one key part: keep A-Z a-z 0-9 - . _ ~, write every other byte as %XX.
local function enc(s)
  return (string.gsub(s, "[^%w%-%._~]", function(c)
    return string.format("%%%02X", string.byte(c))
  end))
end

-- The key of a checkpoint hash (also K.checkpoint): for a thread other than the script's own.
local function checkpoint_key(prefix, tag, ns, id)
  return prefix .. ":cp:" .. tag .. ":" .. ns .. ":" .. enc(id)
end

-- The last keyspace made. A Redis Function library keeps it from one call to the next (the
-- calls of a chat turn are of one thread), which saves making its closures again each time; a
-- script starts without it. Nothing writes to a keyspace once it is made.
local last_keyspace = nil

local function keyspace(prefix, tag)
  local K = last_keyspace
  if K and K.tag == tag and K.prefix == prefix then return K end
  K = {}
  K.prefix = prefix
  K.thread = prefix .. ":th:" .. tag
  K.runs = prefix .. ":runs:" .. tag
  K.ttl = prefix .. ":ttl:" .. tag
  -- the threads-by-value indexes the thread is listed in (their suffixes), so that a delete
  -- takes it out of every one, also of those only checkpoints gone before listed it
  K.values = prefix .. ":tv:" .. tag
  -- on a cluster: what the threads-by-value lists are known to hold of the thread (its
  -- incarnation, and a score bound per list; see include/lists.lua)
  K.bounds = prefix .. ":tb:" .. tag
  -- garbage of an operation done in steps (delete, prune, copy) still to be reaped: while it
  -- exists, writers wait (they reply "REAPING" and the client reaps first)
  K.gc = prefix .. ":gc:" .. tag
  -- the registry of live threads (thread_deadlines.lua): outside every thread's slot, so
  -- only a script on a standalone server that the client declared it to touches it
  K.live_threads = prefix .. ":alive"
  function K.index(ns) return prefix .. ":idx:" .. tag .. ":" .. ns end
  function K.writes_index(ns) return prefix .. ":wi:" .. tag .. ":" .. ns end
  -- the deadline ledger: raw checkpoint id -> when its record expires (include/ledger.lua)
  function K.ledger(ns) return prefix .. ":dl:" .. tag .. ":" .. ns end
  function K.checkpoint(ns, id) return checkpoint_key(prefix, tag, ns, id) end
  function K.writes(ns, id) return prefix .. ":w:" .. tag .. ":" .. ns .. ":" .. enc(id) end
  function K.blob(ns, ref) return prefix .. ":blob:" .. tag .. ":" .. ns .. ":" .. ref end
  function K.run(run) return prefix .. ":run:" .. tag .. ":" .. run end
  -- loose blobs: refs of namespace N that a replaced checkpoint record referenced and its
  -- replacement does not; delete and prune find them here, as no checkpoint leads to them
  function K.loose_blobs(ns) return prefix .. ":lb:" .. tag .. ":" .. ns end
  -- global metadata index (standalone servers only): "<key>:<canonical JSON>", encoded
  function K.metadata_index(suffix) return prefix .. ":mi:" .. suffix end
  -- threads by metadata value (standalone servers only): the tags of the threads that have
  -- (or had) a checkpoint with that value, for the values thread_indexed() takes
  function K.threads_with(suffix) return prefix .. ":tm:" .. suffix end
  -- whether another thread exists: its root, or its gc root (a copy not yet published)
  function K.thread_exists(other_tag)
    return redis.call("EXISTS", prefix .. ":th:" .. other_tag, prefix .. ":gc:" .. other_tag) > 0
  end
  -- how long another thread lives (PTTL of its root: -1 forever, -2 gone); a copy not yet
  -- published may live forever
  function K.thread_life(other_tag)
    local left = redis.call("PTTL", prefix .. ":th:" .. other_tag)
    if left == -2 and redis.call("EXISTS", prefix .. ":gc:" .. other_tag) == 1 then return -1 end
    return left
  end
  K.tag = tag
  -- a checkpoint's member in a metadata index: its id first, so lexical order = time order
  function K.member(ns, id) return id .. "\0" .. tag .. ":" .. ns end
  last_keyspace = K
  return K
end

-- The keys of job n of a thread's gc root (see include/jobs.lua): its progress, and the
-- containers it works through (a renamed thread root, old indexes, ...).
local function jobspace(prefix, tag, n)
  local G = {}
  G.state = prefix .. ":gc:" .. tag .. ":" .. n
  function G.part(name) return G.state .. ":" .. name end
  function G.ns_part(name, ns) return G.state .. ":" .. name .. ":" .. ns end
  return G
end

-- Split a metadata index member into checkpoint id, hash tag and namespace. The id may hold
-- any byte; tag and namespace are encoded, so the last NUL is the separator.
local function parse_member(member)
  local sep, at = nil, 0
  repeat  -- plain find: Lua 5.1 patterns cannot hold a NUL
    sep, at = at, string.find(member, "\0", at + 1, true)
  until not at
  local id, rest = string.sub(member, 1, sep - 1), string.sub(member, sep + 1)
  local close = string.find(rest, "}:", 1, true)
  return id, string.sub(rest, 1, close), string.sub(rest, close + 2)
end

-- Undo enc().
local function dec(s)
  if not string.find(s, "%", 1, true) then return s end  -- (most parts: nothing encoded)
  return (string.gsub(s, "%%(%x%x)", function(h) return string.char(tonumber(h, 16)) end))
end
