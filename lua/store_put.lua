--[[
  store_put: put or delete one item of a store namespace (langgraph.store.rediskv).

  KEYS[1]  S:{S:ns}:h  HASH item key -> value (JSON)
  KEYS[2]  S:{S:ns}:m  HASH item key -> created_at (µs since the epoch)
  KEYS[3]  S:{S:ns}:z  ZSET item key scored by updated_at (µs): the namespace's index
  KEYS[4]  S:{S:ns}:x  ZSET item key scored by its expiry (ms); only items with a TTL
  KEYS[5]  S:{S:ns}:t  HASH item key -> its TTL (ms), for refresh_ttl
  KEYS[6]  S:{S:ns}:v  HASH item key -> its vectors (float32s, semantic search; see vectors.py)
  KEYS[7]  S:{S:ns}:d  SET the item keys whose vectors have documents (the server's search)

  ARGV[1]  now (ms), or "": the server's clock (TIME); expired items are purged first (at
           most 100)
  ARGV[2]  item key
  ARGV[3]  value JSON, or "" to delete
  ARGV[4]  updated_at (µs), the index score, or "": the server's clock; raised above the
           namespace's newest when it is not (see store_stamp)
  ARGV[5]  TTL (ms), or "" for none
  ARGV[6]  the item's vectors, or "" for none: a put replaces the ones it had
  ARGV[7]  the namespace's tags (keys.py namespace_tags) when the store uses the server's
           vector search: each vector is also a document S:sv:...:{S:ns}:i:key (keys.py),
           written and deleted with the item; "": none (those the item had go)

  Counts: KEYS 7; ARGV 7
  Reply: 1 when the namespace had no item before this put and has one now (the caller writes
  the namespace into the global index once more), else 0.
]]
-- requires: store_purge, store_write

local key = ARGV[2]
local now, was_empty = store_begin(ARGV[1], key)
if ARGV[3] == "" then
  store_drop(key)
  return 0
end
local stamp = store_stamp(ARGV[4])
store_write(key, ARGV[3], stamp, stamp, true, ARGV[5], ARGV[6], ARGV[7], now)
if was_empty then
  return 1
end
return 0
