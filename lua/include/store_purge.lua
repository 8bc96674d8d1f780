-- Shared by the store scripts (lua/store_*.lua): expired items of one namespace go, with their
-- index entries, a bounded number per call. KEYS as every store script: h m z x t (see keys).
-- requires:

local STORE_PURGE_STEP = 100

local function store_drop(key)
  redis.call("HDEL", KEYS[1], key)
  redis.call("HDEL", KEYS[2], key)
  redis.call("ZREM", KEYS[3], key)
  redis.call("ZREM", KEYS[4], key)
  redis.call("HDEL", KEYS[5], key)
end

local function store_purge(now)
  local gone = redis.call("ZRANGEBYSCORE", KEYS[4], "-inf", now, "LIMIT", 0, STORE_PURGE_STEP)
  for _, key in ipairs(gone) do
    store_drop(key)
  end
  return #gone
end

local function store_expired(key, now)
  local at = redis.call("ZSCORE", KEYS[4], key)
  return at and tonumber(at) <= now
end
