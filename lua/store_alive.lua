--[[
  store_alive: how many live items a store namespace holds (list_namespaces, the sweep of the
  global namespace index).

  KEYS[1..7]  S:{S:ns}:h m z x t v d, as store_put.lua

  ARGV[1]  now (ms), or "": the server's clock (TIME)

  Counts: KEYS 7; ARGV 1
  Reply: {live, purged}: the number of unexpired items, and of expired ones purged now (at
  most 100 a call; those left are not counted live).
]]
-- requires: store_purge

local now = store_now(ARGV[1])
local purged = store_purge(now)
return {redis.call("ZCARD", KEYS[3]) - redis.call("ZCOUNT", KEYS[4], "-inf", now), purged}
