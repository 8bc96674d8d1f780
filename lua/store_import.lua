--[[
  store_import: copy one item of another store into its namespace, with the source's
  created_at and updated_at (RedisStore.import_items, which `rediskv store migrate` runs).

  KEYS[1..7]  S:{S:ns}:h m z x t v d, as store_put.lua

  ARGV[1]  now (ms), or "": the server's clock (TIME); expired items are purged first (at
           most 100)
  ARGV[2]  item key
  ARGV[3]  value JSON, as a put writes it: an item here is the same when its JSON is the same
  ARGV[4]  created_at (µs)
  ARGV[5]  updated_at (µs): the index score of a copy
  ARGV[6]  TTL (ms), or "" for none
  ARGV[7]  the item's vectors, or "" for none
  ARGV[8]  the namespace's tags when the store uses the server's vector search (as
           store_put.lua), or ""
  ARGV[9]  "1": replace an item here that differs (recopy); "": leave it
  ARGV[10] "1": the store has an index, and ARGV[7] is "" because the caller found the item
           present or in conflict (not embedded): if it is to be written after all (deleted
           or changed meanwhile), the reply is "retry" and nothing is written

  Counts: KEYS 7; ARGV 10
  Reply: {status, was_empty}. status: "copied" (no such item here: written with the source's
  stamps, whatever the namespace's newest: a new item is not an update), "present" (the same
  value and created_at are here: nothing written, except ARGV[7]'s vectors for an item that
  has none), "conflict" (another item is here: nothing written), "replaced" (ARGV[9]: written
  over it in one step, created_at the source's, updated_at above the namespace's newest as an
  update's is, see store_stamp), "retry" (ARGV[10]: embed it, then send it again). was_empty: 1 when the namespace had no item before and has
  this one now (the caller writes the namespace into the global index once more), else 0.
]]
-- requires: store_purge, store_write

local key = ARGV[2]
local now, was_empty = store_begin(ARGV[1], key)
local value = redis.call("HGET", KEYS[1], key)
local stamp = ARGV[5]
local status = "copied"
if value then
  if value == ARGV[3] and redis.call("HGET", KEYS[2], key) == ARGV[4] then
    if ARGV[7] ~= "" and redis.call("HEXISTS", KEYS[6], key) == 0 then
      store_write_vectors(key, ARGV[7], ARGV[8])
    end
    return {"present", 0}
  end
  if ARGV[9] ~= "1" then
    return {"conflict", 0}
  end
  stamp = store_stamp(ARGV[5])
  status = "replaced"
end
if ARGV[10] == "1" then
  return {"retry", 0}
end
store_write(key, ARGV[3], stamp, ARGV[4], false, ARGV[6], ARGV[7], ARGV[8], now)
return {status, was_empty and 1 or 0}
