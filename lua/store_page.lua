--[[
  store_page: a page of a store namespace's items, newest-updated first (search).

  KEYS[1..5]  S:{S:ns}:h m z x t, as store_put.lua

  ARGV[1]  now (ms)
  ARGV[2]  1: refresh the TTL of the items returned, 0: not
  ARGV[3]  start: rank in the index, newest first
  ARGV[4]  count: ranks to read (the server's work is bounded by it)

  Counts: KEYS 5; ARGV 4
  Reply: {removed, key1, value1, created1, updated1, key2, ...}: the live items among the
  ranks start .. start+count-1; removed: how many of those ranks were expired items, removed
  now (the next page starts at start + count - removed).
]]
-- requires: store_purge

local now = tonumber(ARGV[1])
local start = tonumber(ARGV[3])
local ranked = redis.call("ZREVRANGE", KEYS[3], start, start + tonumber(ARGV[4]) - 1, "WITHSCORES")
local reply = {0}
local removed = 0
for i = 1, #ranked, 2 do
  local key = ranked[i]
  if store_expired(key, now) then
    store_drop(key)
    removed = removed + 1
  else
    if ARGV[2] == "1" then
      local ttl = redis.call("HGET", KEYS[5], key)
      if ttl then
        redis.call("ZADD", KEYS[4], now + tonumber(ttl), key)
      end
    end
    reply[#reply + 1] = key
    reply[#reply + 1] = redis.call("HGET", KEYS[1], key)
    reply[#reply + 1] = redis.call("HGET", KEYS[2], key)
    reply[#reply + 1] = ranked[i + 1]
  end
end
reply[1] = removed
return reply
