-- requires: expiry
-- The deadline ledger (K.ledger(ns), a HASH: raw checkpoint id -> "<deadline> <setting>": the
-- unix second its record expires at as the script that set its expiry computed it, "0" when
-- it does not expire, and the thread's own ttl setting it was computed under, P:ttl:{T} or
-- "-" for none). It tells a record the server evicted from one that expired: both are simply
-- missing, and records do not expire in id order (refresh_on_read renews a past checkpoint
-- read by id; savers of one prefix may use other ttls). Written wherever a record's expiry is
-- set or renewed, an entry removed with its index entry; the key expires with the index (its
-- expiry only grows). Only a read that finds a record missing looks it up.
--
-- A writer that knows no ledger (release 0.1.0's set_thread_ttl, pin_thread or unpin_thread
-- during a rolling upgrade) can shorten expiries below the deadlines written before: it gives
-- the root the shorter expiry and leaves the ledger's, which this release never lets outlive
-- the root, so a reader trusts no entry of a ledger that does (ledger_trusted), and the next
-- put makes it again from the records' real expiries. This release's own set_thread_ttl
-- writes every record's deadline anew (include/reap_ttl.lua). The setting each entry names is
-- what it was computed under, kept for a reader of the ledger (doctor, tests); no read
-- compares it any more.

-- The server's clock in whole seconds (floored: a deadline never lies past the real expiry).
local function now_seconds()
  return tonumber(redis.call("TIME")[1])
end

-- The thread's own ttl setting, as the entries name it.
local function ttl_setting(K)
  return redis.call("GET", K.ttl) or "-"
end

-- The entry of a record just given `ttl` seconds from `now` (0: no expiry) under `setting`
-- (entry_live reads it back).
local function ledger_entry(ttl, now, setting)
  return (ttl == 0 and "0" or tostring(now + ttl)) .. " " .. setting
end

-- A ledger made while its index has entries (the ledger was evicted or dropped, or the
-- namespace was written by 0.1.x) gets the deadlines of the records still there, read from
-- their expiries, for the newest LEDGER_BACKFILL of them: so an eviction of the ledger leaves
-- a window (until the next put), not a namespace whose later evictions read as expiries for
-- good. The same bound caps what a put reindexes from a ledger (reindex_from_ledger).
local LEDGER_BACKFILL = 1000
local function backfill_ledger(K, ns, key, now, setting)
  local ids = redis.call("ZRANGE", K.index(ns), -LEDGER_BACKFILL, -1)
  local fields = {}
  for _, id in ipairs(ids) do
    local left = redis.call("PTTL", K.checkpoint(ns, id))
    if left == -1 then
      fields[#fields + 1] = id
      fields[#fields + 1] = "0 " .. setting
    elseif left >= 0 then
      fields[#fields + 1] = id
      fields[#fields + 1] = (now + math.floor(left / 1000)) .. " " .. setting
    end
  end
  if #fields > 0 then redis.call("HSET", key, unpack(fields)) end
end

-- Record that checkpoint N:I's record was just given `ttl` seconds (0: no expiry). `left`:
-- the ledger key's PTTL, `setting`: the thread's ttl setting (ttl_setting), when the caller
-- has them. Returns the entry's deadline (0: none): the record and the ledger live at least
-- until that second.
local function note_deadline(K, ns, id, ttl, left, setting)
  local key = K.ledger(ns)
  left = left or redis.call("PTTL", key)
  setting = setting or ttl_setting(K)
  local now = (ttl > 0 or left == -2) and now_seconds()  -- (no clock for a "0")
  if left == -2 then backfill_ledger(K, ns, key, now, setting) end
  redis.call("HSET", key, id, ledger_entry(ttl, now, setting))
  keep_alive(key, ttl, left == -2, left)
  return ttl > 0 and now + ttl or 0
end

-- Keep checkpoint N:I's record alive at least `ttl` seconds more (0: forever), as keep_alive
-- does (expiries only grow), its ledger entry with it when its expiry changed. `left`: the
-- record's PTTL when the caller has it.
local function keep_record_alive(K, ns, id, ttl, left)
  local cp = K.checkpoint(ns, id)
  left = left or redis.call("PTTL", cp)
  if left == -2 then return end
  keep_alive(cp, ttl, false, left)
  if (ttl == 0 and left ~= -1) or (ttl > 0 and left >= 0 and left < ttl * 1000) then
    note_deadline(K, ns, id, ttl)
  end
end

-- Drop the entry of checkpoint N:I, whose record expired or was dropped (prune, keep_last,
-- delete_for_runs). The ledger of the graph's own namespace, while it expires, keeps its last
-- entry as a tombstone (deadline 1: passed) rather than go with it: it lives as long as any
-- deadline the registry of live threads holds for the thread, so a thread emptied before
-- that (delete_for_runs; or a writer that knows no ledger shortened its expiries: 0.1.0's
-- set_thread_ttl) reads as new, not as evicted whole (missing_root). drop.lua's
-- forget_empty_namespace leaves such a ledger too.
local function drop_entry(K, ns, id)
  local key = K.ledger(ns)
  if ns == "" and redis.call("HLEN", key) == 1 and redis.call("HEXISTS", key, id) == 1
      and redis.call("PTTL", key) > 0 then
    redis.call("HSET", key, id, "1 -")
  else
    redis.call("HDEL", key, id)
  end
end

-- Whether a writer that knows no ledger shortened the thread's expiries below the deadlines
-- its ledger holds (release 0.1.0's set_thread_ttl, pin_thread or unpin_thread with a shorter
-- ttl, also one that leaves the thread's setting as it was): this release keeps the root
-- alive at least as long as each ledger key (a put or a renewal gives both the same ttl,
-- expiries only grow, and its own set_thread_ttl drops the ledgers), while 0.1.0 gives the
-- root its new expiry and leaves the ledger's. `root_left`, `ledger_left`: their PTTLs (ms);
-- two seconds of grace cover renewals a second apart.
local function expiries_shortened(root_left, ledger_left)
  if root_left < 0 or ledger_left == -2 then return false end  -- (no expiry, or no key)
  return ledger_left == -1 or root_left + 2000 < ledger_left
end

-- Whether the ledger of namespace N may be trusted at all: not while a whole-thread job is
-- pending (a ttl change in steps, maybe 0.1.0's, has given some keys their new expiry and not
-- others yet), nor once expiries_shortened says so.
local function ledger_trusted(K, ns)
  if redis.call("EXISTS", K.gc) == 1 then return false end
  return not expiries_shortened(redis.call("PTTL", K.thread), redis.call("PTTL", K.ledger(ns)))
end

-- Whether an entry says its record should still be stored: its deadline not passed ("0":
-- never; a second of grace covers a script that set the expiry in one second and read the
-- clock in the next). `now`: now_seconds(), read once by the caller. (The setting an entry
-- names is no longer compared with the thread's: the root's expiry tells a writer that knows
-- no ledger shortening the thread, ledger_trusted, and an evicted P:ttl:{T} would otherwise
-- make every entry untrusted, and the losses after it silent.)
local function entry_live(entry, now)
  local deadline = string.match(entry, "^(%d+) ")
  return deadline ~= nil and (deadline == "0" or tonumber(deadline) > now + 1)
end

-- Whether checkpoint N:I, whose record is missing while its index entry is there, was
-- evicted: its ledger entry says it should still be stored. No entry (a record written before
-- the ledger existed, or the ledger itself evicted) or an entry of another setting reads as
-- expired, as before.
local function record_evicted(K, ns, id)
  local entry = redis.call("HGET", K.ledger(ns), id)
  return entry ~= false and entry_live(entry, now_seconds()) and ledger_trusted(K, ns)
end

-- The entries of namespace N's ledger, { id, entry, id, entry, ... }: all of them up to
-- LEDGER_BACKFILL (a sample would miss the few records an eviction left), else a random
-- LEDGER_BACKFILL of them (bounded work). Only reads that found something missing ask.
local function ledger_entries(K, ns)
  local key = K.ledger(ns)
  if redis.call("HLEN", key) <= LEDGER_BACKFILL then return redis.call("HGETALL", key) end
  return redis.call("HRANDFIELD", key, LEDGER_BACKFILL, "WITHVALUES") or {}
end

-- Whether namespace N's ledger holds a record that should still be stored: the index
-- outlives every record it holds (a put or a renewal extends it with the record), so such a
-- ledger without its index is one whose index was evicted. `stored`: only an entry whose
-- record is still there counts (missing_root).
local function ledger_live(K, ns, stored)
  local entries = ledger_entries(K, ns)
  if #entries == 0 or not ledger_trusted(K, ns) then return false end
  local now = now_seconds()
  for i = 2, #entries, 2 do
    if entry_live(entries[i], now)
        and (not stored or redis.call("EXISTS", K.checkpoint(ns, entries[i - 1])) == 1) then
      return true
    end
  end
  return false
end

-- Why a thread's root is missing (no delete is under way): "evicted" when a key it leads to
-- is left. The index, the writes index, the runs and the thread's values expire with the root
-- or before it, and a delete moves them with the root (into a job of the gc root) or reaps
-- them after it, so one of them without the root is a root evicted. So is a ledger that names
-- a record still stored and still due: release 0.1.0's delete, which knows no ledger, leaves
-- it, but not the records (false: a thread so deleted). "untraced" when no key of the thread
-- is left at all, nor the ledger of its graph's own namespace: a thread that never existed,
-- expired, or was evicted whole; only the registry of live threads, outside the thread's slot
-- (thread_deadlines.lua), tells them apart, and the client asks it. That ledger lives as long
-- as any deadline the registry holds (a put of the namespace notes both), so a thread that
-- 0.1.0 deleted or shortened is never untraced while the registry says it is due; so does
-- the thread's own ttl setting, which a ttl change notes (a thread with no checkpoint yet
-- may get one). One EXISTS where the thread never existed (the first read of every new
-- chat).
local function missing_root(K, ns)
  local index, writes_index = K.index(ns), K.writes_index(ns)
  if redis.call("EXISTS", index, writes_index, K.runs, K.values, K.ledger(ns), K.ledger(""),
      K.gc, K.ttl) == 0 then
    return "untraced"
  end
  if redis.call("EXISTS", K.gc) == 1 then return false end
  if redis.call("EXISTS", index, writes_index, K.runs, K.values) > 0 then return "evicted" end
  return ledger_live(K, ns, true) and "evicted"
end

-- A put that finds the ledger but not the index (the index was evicted: it would start again
-- with the new checkpoint alone, and the history before it would be gone without a word)
-- indexes again what the ledger names: the records still stored, and those still due (then
-- evicted: a read of them says so, where dropping them would leave a silent hole); the
-- entries of the others go (expired). A ledger of more than LEDGER_BACKFILL entries is left
-- alone (one put does bounded work): then the index starts again, and `rediskv doctor`
-- reports the records no index leads to.
local function reindex_from_ledger(K, ns, index)
  local key = K.ledger(ns)
  if redis.call("HLEN", key) > LEDGER_BACKFILL then return end
  local entries = redis.call("HGETALL", key)
  local now = now_seconds()
  for i = 1, #entries, 2 do
    local id = entries[i]
    local stored = redis.call("EXISTS", K.checkpoint(ns, id)) == 1
    if stored or entry_live(entries[i + 1], now) then
      redis.call("ZADD", index, 0, id)
    else
      redis.call("HDEL", key, id)
    end
  end
end
