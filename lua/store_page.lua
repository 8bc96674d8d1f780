--[[
  store_page: a page of a store namespace's items, newest-updated first (search).

  KEYS[1..7]  S:{S:ns}:h m z x t v d, as store_put.lua

  ARGV[1]  now (ms), or "": the server's clock (TIME)
  ARGV[2]  1: refresh the TTL of the items returned, 0: not
  ARGV[3]  bound: the score (updated_at) of the last entry the previous page read, or "" for
           the first page
  ARGV[4]  bound: that entry's member (item key)
  ARGV[5]  count: index entries to read (the server's work is bounded by it, and by the
           entries sharing the bound's score: none for stamps this release writes)
  ARGV[6]  1: each item's vectors too (a search with a query), "": not
  ARGV[7]  bytes: the page ends after the item that brings the values and vectors it holds
           to this many (at least one item a page), "" for no limit: an item's vectors are
           as many as its texts, so a count of items alone does not bound a reply

  The page is the entries after the bound in the index's order (score, then member, both
  descending), not ranks: an item that stays in the index through a search is read once
  whatever else is put or deleted between its pages (an update moves an item to the front,
  past the bound: it is read at most once).

  Counts: KEYS 7; ARGV 7
  Reply: {read, score, member, key1, value1, created1, updated1, key2, ...}: the live items
  among the `read` entries read (fewer than count: the namespace is done; a page the bytes
  ended says count), score and member those of the last entry read (the next page's bound;
  "" when none); expired items go, with
  their index entries. With ARGV[6] = 1, each item's vectors follow its updated_at ("" when
  it has none). {-1, key, what} when an item lost part of itself ("value" or
  "created_at": a key of the namespace was evicted).
]]
-- requires: store_purge

local now = store_now(ARGV[1])
local count = tonumber(ARGV[5])
local entries
if ARGV[3] == "" then
  entries = redis.call("ZREVRANGE", KEYS[3], 0, count - 1, "WITHSCORES")
else
  entries = {}
  local tied = redis.call("ZREVRANGEBYSCORE", KEYS[3], ARGV[3], ARGV[3], "WITHSCORES")
  for i = 1, #tied, 2 do
    if #entries < 2 * count and store_bytes_before(tied[i], ARGV[4]) then
      entries[#entries + 1] = tied[i]
      entries[#entries + 1] = tied[i + 1]
    end
  end
  local left = count - #entries / 2
  if left > 0 then
    local lower = redis.call("ZREVRANGEBYSCORE", KEYS[3], "(" .. ARGV[3], "-inf",
      "WITHSCORES", "LIMIT", 0, left)
    for _, v in ipairs(lower) do
      entries[#entries + 1] = v
    end
  end
end
local reply = {#entries / 2, "", ""}
if #entries > 0 then
  reply[2] = entries[#entries]
  reply[3] = entries[#entries - 1]
end
local budget, held = tonumber(ARGV[7]), 0
for i = 1, #entries, 2 do
  if budget and held >= budget then  -- (the next page starts after the last item sent)
    reply[1], reply[2], reply[3] = count, entries[i - 1], entries[i - 2]
    break
  end
  local key = entries[i]
  if store_expired(key, now) then
    store_drop(key)
  else
    local value = redis.call("HGET", KEYS[1], key)
    if not value then return {-1, key, "value"} end
    local created = redis.call("HGET", KEYS[2], key)
    if not created then return {-1, key, "created_at"} end
    if ARGV[2] == "1" then
      store_refresh(key, now)
    end
    reply[#reply + 1] = key
    reply[#reply + 1] = value
    reply[#reply + 1] = created
    reply[#reply + 1] = entries[i + 1]
    if ARGV[6] == "1" then
      reply[#reply + 1] = redis.call("HGET", KEYS[6], key) or ""
      held = held + #reply[#reply]
    end
    held = held + #value
  end
end
return reply
