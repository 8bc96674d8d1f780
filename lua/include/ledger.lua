-- requires: expiry
-- The deadline ledger (K.ledger(ns), a HASH: raw checkpoint id -> the unix second its record
-- expires at as the script that set its expiry computed it, "0" when it does not expire). It
-- tells a record the server evicted from one that expired: both are simply missing, and
-- records do not expire in id order (refresh_on_read renews a past checkpoint read by id;
-- savers of one prefix may use other ttls). Written wherever a record's expiry is set or
-- renewed, an entry removed with its index entry; the key expires with the index (its
-- expiry only grows). Only a read that finds a record missing looks it up.

-- The server's clock in whole seconds (floored: a deadline never lies past the real expiry).
local function now_seconds()
  return tonumber(redis.call("TIME")[1])
end

-- A ledger made while its index has entries (the ledger was evicted, or the namespace was
-- written by 0.1.x) gets the deadlines of the records still there, read from their expiries,
-- for the newest LEDGER_BACKFILL of them: so an eviction of the ledger leaves a window (until
-- the next put), not a namespace whose later evictions read as expiries for good.
local LEDGER_BACKFILL = 1000
local function backfill_ledger(K, ns, key, now)
  local ids = redis.call("ZRANGE", K.index(ns), -LEDGER_BACKFILL, -1)
  local fields = {}
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
  if #fields > 0 then redis.call("HSET", key, unpack(fields)) end
end

-- Record that checkpoint N:I's record was just given `ttl` seconds (0: no expiry). `left`:
-- the ledger key's PTTL when the caller has it.
local function note_deadline(K, ns, id, ttl, left)
  local key = K.ledger(ns)
  left = left or redis.call("PTTL", key)
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
-- evicted: its ledger says it should still be stored. A second of grace covers a script that
-- set the expiry in one second and read the clock in the next. No entry (a record written
-- before the ledger existed, or the ledger itself evicted) reads as expired, as before.
local function record_evicted(K, ns, id)
  local deadline = redis.call("HGET", K.ledger(ns), id)
  if not deadline then return false end
  return deadline == "0" or tonumber(deadline) > now_seconds() + 1
end

-- Whether namespace N's ledger holds a record that should still be stored (its deadline not
-- passed, or "0"), from a sample of its entries: the index outlives every record it holds (a
-- put or a renewal extends it with the record), so such a ledger without its index is one
-- whose index was evicted.
local function ledger_live(K, ns)
  local sample = redis.call("HRANDFIELD", K.ledger(ns), 8, "WITHVALUES")
  local now = nil
  for i = 2, #sample, 2 do
    if sample[i] == "0" then return true end
    now = now or now_seconds()
    if tonumber(sample[i]) > now + 1 then return true end
  end
  return false
end

-- A put that finds the ledger but not the index (the index was evicted: it would start again
-- with the new checkpoint alone, and the history before it would be gone without a word)
-- indexes again the records the ledger names that are still stored; the entries of those
-- that are not go (no index entry leads to them: evicted or expired, nothing tells).
local function reindex_from_ledger(K, ns, index)
  local key, cursor = K.ledger(ns), "0"
  repeat
    local reply = redis.call("HSCAN", key, cursor, "COUNT", 200)
    cursor = reply[1]
    local fields = reply[2]
    for i = 1, #fields, 2 do
      local id = fields[i]
      if redis.call("EXISTS", K.checkpoint(ns, id)) == 1 then
        redis.call("ZADD", index, 0, id)
      else
        redis.call("HDEL", key, id)
      end
    end
  until cursor == "0"
end
