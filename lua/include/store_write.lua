-- Shared by store_put.lua and store_import.lua: the writes of one item, its value, created_at,
-- index entry, TTL and vectors (with their documents, for the server's vector search). KEYS as
-- every store script: h m z x t v d (see keys).
-- requires: store_purge

-- An item's vectors ("" for none: those it had go), and their documents when ``tags`` (the
-- namespace's, keys.py namespace_tags) says the store uses the server's vector search.
local function store_write_vectors(key, vectors, tags)
  if vectors == "" then
    -- an item that had no vectors had no documents either (a plain store sends no more)
    if redis.call("HDEL", KEYS[6], key) == 1 and redis.call("SREM", KEYS[7], key) == 1 then
      store_drop_docs(key, 0)
    end
    return
  end
  redis.call("HSET", KEYS[6], key, vectors)
  if tags ~= "" then
    store_write_docs(key, vectors, tags)
    redis.call("SADD", KEYS[7], key)
  elseif redis.call("SREM", KEYS[7], key) == 1 then
    store_drop_docs(key, 0)
  end
end

-- The item written whole: ``stamp`` its updated_at (the index score, µs), ``created`` its
-- created_at (µs; ``keep_created``: an item that has one keeps it, as a put keeps it), ``ttl``
-- ms or "" for none (from ``now``, ms).
local function store_write(key, value, stamp, created, keep_created, ttl, vectors, tags, now)
  redis.call("HSET", KEYS[1], key, value)
  if keep_created then
    redis.call("HSETNX", KEYS[2], key, created)
  else
    redis.call("HSET", KEYS[2], key, created)
  end
  redis.call("ZADD", KEYS[3], stamp, key)
  if ttl == "" then
    redis.call("ZREM", KEYS[4], key)
    redis.call("HDEL", KEYS[5], key)
  else
    redis.call("ZADD", KEYS[4], now + tonumber(ttl), key)
    redis.call("HSET", KEYS[5], key, ttl)
  end
  store_write_vectors(key, vectors, tags)
end

-- A writing script's start: now (ms: ``now_arg``, or "" for the server's clock), the
-- namespace's expired items purged (at most 100), this item gone if it expired, and whether
-- the namespace held no item then.
local function store_begin(now_arg, key)
  local now = store_now(now_arg)
  store_purge(now)
  if store_expired(key, now) then
    store_drop(key)
  end
  return now, redis.call("ZCARD", KEYS[3]) == 0
end
