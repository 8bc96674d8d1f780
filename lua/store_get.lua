--[[
  store_get: one item of a store namespace (langgraph.store.rediskv).

  KEYS[1..7]  S:{S:ns}:h m z x t v d, as store_put.lua

  ARGV[1]  now (ms), or "": the server's clock (TIME)
  ARGV[2]  1: refresh the item's TTL (refresh_on_read), 0: not
  ARGV[3]  item key
  ARGV[4]  "1": the item's vectors too (a search on the server's vector search scores the
           items it found), absent or "": not

  Counts: KEYS 7; ARGV 3..4
  Reply: {value, created_at µs, updated_at µs}, then its vectors ("" when none) with
  ARGV[4] = "1"; or false when there is none (or it expired:
  then it goes, with its index entries), or {0, what} when the item lost part of itself
  ("value", "created_at" or "updated_at": a key of the namespace was evicted).
]]
-- requires: store_purge

local now = store_now(ARGV[1])
local key = ARGV[3]
if store_expired(key, now) then
  store_drop(key)
  return false
end
local value = redis.call("HGET", KEYS[1], key)
local updated = redis.call("ZSCORE", KEYS[3], key)
if not value then
  if updated then return {0, "value"} end
  return false
end
local created = redis.call("HGET", KEYS[2], key)
if not created then return {0, "created_at"} end
if not updated then return {0, "updated_at"} end
if ARGV[2] == "1" then
  store_refresh(key, now)
end
if ARGV[4] == "1" then
  return {value, created, updated, redis.call("HGET", KEYS[6], key) or ""}
end
return {value, created, updated}
