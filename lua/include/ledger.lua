-- requires: expiry
-- The deadline ledger (K.ledger(ns), a HASH: raw checkpoint id -> the unix second its record
-- expires at as the script that set its expiry computed it, "0" when it does not expire). It
-- tells a record the server evicted from one that expired: both are simply missing, and
-- records do not expire in id order (refresh_on_read renews a past checkpoint read by id;
-- savers of one prefix may use other ttls). Written wherever a record's expiry is set or
-- renewed, an entry removed with its index entry; the key expires with the index (its
-- expiry only grows). Only a read that finds a record missing looks it up.
--
-- The field "" (no checkpoint has an empty id) is the ledger's stamp: the thread's own ttl
-- setting (P:ttl:{T}, "-" for none) its deadlines were computed under. A writer that changes
-- the setting without knowing the ledger (release 0.1.0's set_thread_ttl, pin_thread,
-- unpin_thread, run during a rolling upgrade) can shorten expiries below the ledger's
-- deadlines; the stamp then differs from the setting, readers trust no entry of the ledger,
-- and the next put makes it again from the records' real expiries. This release's own
-- set_thread_ttl drops the ledgers the same way (include/reap_ttl.lua).

local STAMP = ""

-- The server's clock in whole seconds (floored: a deadline never lies past the real expiry).
local function now_seconds()
  return tonumber(redis.call("TIME")[1])
end

-- The thread's own ttl setting, as the stamp holds it.
local function ttl_stamp(K)
  return redis.call("GET", K.ttl) or "-"
end

-- A ledger made while its index has entries (the ledger was evicted or dropped, or the
-- namespace was written by 0.1.x) gets the deadlines of the records still there, read from
-- their expiries, for the newest LEDGER_BACKFILL of them: so an eviction of the ledger leaves
-- a window (until the next put), not a namespace whose later evictions read as expiries for
-- good. The same bound caps what a put reindexes from a ledger (reindex_from_ledger).
local LEDGER_BACKFILL = 1000
local function backfill_ledger(K, ns, key, now)
  local ids = redis.call("ZRANGE", K.index(ns), -LEDGER_BACKFILL, -1)
  local fields = { STAMP, ttl_stamp(K) }
  for _, id in ipairs(ids) do
    local left = redis.call("PTTL", K.checkpoint(ns, id))
    if left == -1 then
      fields[#fields + 1] = id
      fields[#fields + 1] = "0"
    elseif left >= 0 then
      fields[#fields + 1] = id
      fields[#fields + 1] = tostring(now + math.floor(left / 1000))
    end
  end
  redis.call("HSET", key, unpack(fields))
end

-- Record that checkpoint N:I's record was just given `ttl` seconds (0: no expiry). `left`:
-- the ledger key's PTTL when the caller has it. A ledger whose stamp is not the thread's
-- setting is made again (see the top of this file).
local function note_deadline(K, ns, id, ttl, left)
  local key = K.ledger(ns)
  left = left or redis.call("PTTL", key)
  if left ~= -2 and redis.call("HGET", key, STAMP) ~= ttl_stamp(K) then
    redis.call("UNLINK", key)
    left = -2
  end
  local now = (ttl > 0 or left == -2) and now_seconds()  -- (no clock for a "0")
  if left == -2 then backfill_ledger(K, ns, key, now) end
  redis.call("HSET", key, id, ttl == 0 and "0" or tostring(now + ttl))
  keep_alive(key, ttl, left == -2, left)
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

-- Whether checkpoint N:I, whose record is missing while its index entry is there, was
-- evicted: its ledger, stamped with the thread's setting, says it should still be stored. A
-- second of grace covers a script that set the expiry in one second and read the clock in
-- the next. No entry (a record written before the ledger existed, or the ledger itself
-- evicted) or another stamp reads as expired, as before.
local function record_evicted(K, ns, id)
  local found = redis.call("HMGET", K.ledger(ns), id, STAMP)
  if not found[1] or found[2] ~= ttl_stamp(K) then return false end
  return found[1] == "0" or tonumber(found[1]) > now_seconds() + 1
end

-- Whether namespace N's ledger holds a record that should still be stored (its deadline not
-- passed, or "0"), from a sample of its entries: the index outlives every record it holds (a
-- put or a renewal extends it with the record), so such a ledger without its index is one
-- whose index was evicted.
local function ledger_live(K, ns)
  local key = K.ledger(ns)
  if redis.call("HGET", key, STAMP) ~= ttl_stamp(K) then return false end
  local sample = redis.call("HRANDFIELD", key, 8, "WITHVALUES")
  local now = nil
  for i = 2, #sample, 2 do
    if sample[i - 1] ~= STAMP then
      if sample[i] == "0" then return true end
      now = now or now_seconds()
      if tonumber(sample[i]) > now + 1 then return true end
    end
  end
  return false
end

-- A put that finds the ledger but not the index (the index was evicted: it would start again
-- with the new checkpoint alone, and the history before it would be gone without a word)
-- indexes again the records the ledger names that are still stored; the entries of those
-- that are not go (no index entry leads to them: evicted or expired, nothing tells). A ledger
-- of more than LEDGER_BACKFILL entries is left alone (one put does bounded work): then the
-- index starts again, and `rediskv doctor` reports the records no index leads to.
local function reindex_from_ledger(K, ns, index)
  local key = K.ledger(ns)
  if redis.call("HLEN", key) > LEDGER_BACKFILL + 1 then return end  -- (+1: the stamp)
  local fields = redis.call("HGETALL", key)
  for i = 1, #fields, 2 do
    local id = fields[i]
    if id ~= STAMP then
      if redis.call("EXISTS", K.checkpoint(ns, id)) == 1 then
        redis.call("ZADD", index, 0, id)
      else
        redis.call("HDEL", key, id)
      end
    end
  end
end
