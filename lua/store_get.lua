--[[
  store_get: one item of a store namespace (langgraph.store.rediskv).

  KEYS[1..5]  S:{S:ns}:h m z x t, as store_put.lua

  ARGV[1]  now (ms)
  ARGV[2]  1: refresh the item's TTL (refresh_on_read), 0: not
  ARGV[3]  item key

  Counts: KEYS 5; ARGV 3
  Reply: {value, created_at µs, updated_at µs}, or false when there is none (or it expired:
  then it goes, with its index entries).
]]
-- requires: store_purge

local now = tonumber(ARGV[1])
local key = ARGV[3]
if store_expired(key, now) then
  store_drop(key)
  return false
end
local value = redis.call("HGET", KEYS[1], key)
if not value then
  return false
end
if ARGV[2] == "1" then
  local ttl = redis.call("HGET", KEYS[5], key)
  if ttl then
    redis.call("ZADD", KEYS[4], now + tonumber(ttl), key)
  end
end
return {value, redis.call("HGET", KEYS[2], key), redis.call("ZSCORE", KEYS[3], key)}
