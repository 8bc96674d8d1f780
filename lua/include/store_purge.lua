-- Shared by the store scripts (lua/store_*.lua): the store's clock, and expired items of one
-- namespace going, with their index entries and vectors (and the vectors' documents of the
-- server's vector search), a bounded number per call. KEYS as every store script: h m z x t v d
-- (see keys).
-- requires:

local STORE_PURGE_STEP = 100

-- The server's clock (TIME) as [seconds, microseconds], read once a script (Redis freezes it).
local function store_time()
  local t = redis.call("TIME")
  return tonumber(t[1]), tonumber(t[2])
end

-- Now in ms: the argument (a test's virtual clock), or "" for the server's clock, which every
-- client shares (app servers with skewed clocks would disagree on what expired).
local function store_now(arg)
  if arg ~= "" then return tonumber(arg) end
  local seconds, micros = store_time()
  return seconds * 1000 + math.floor(micros / 1000)
end

-- A put's updated_at in µs, as a string: the argument (a virtual clock), or "" for the
-- server's clock; always above the namespace's newest stamp, so that an update moves its item
-- to the front (a search's pages rely on it) and puts keep their order whatever the clocks.
local function store_stamp(arg)
  local stamp
  if arg ~= "" then
    stamp = tonumber(arg)
  else
    local seconds, micros = store_time()
    stamp = seconds * 1000000 + micros
  end
  local top = redis.call("ZREVRANGE", KEYS[3], 0, 0, "WITHSCORES")
  if top[2] and tonumber(top[2]) >= stamp then stamp = tonumber(top[2]) + 1 end
  return string.format("%.0f", stamp)  -- (16 digits: tostring would round them)
end

-- Whether a sorts before b byte by byte, as a ZSET orders members of one score (Lua's `<`
-- follows the server's locale).
local function store_bytes_before(a, b)
  for i = 1, math.min(#a, #b) do
    local x, y = string.byte(a, i), string.byte(b, i)
    if x ~= y then return x < y end
  end
  return #a < #b
end

-- The key of the document of an item's i-th vector (the server's vector search), in the slot
-- of KEYS: S:sv:L:{S:N}:i:key, from KEYS[1] = S:{S:N}:h (L: N's length in bytes). The Lua half
-- of keys.py vector_doc_key.
local function store_doc_key(key, i)
  local prefix = string.match(KEYS[1], "^[^:]*")
  local tag = string.sub(KEYS[1], #prefix + 2, -3)  -- {S:N}
  return prefix .. ":sv:" .. (#tag - #prefix - 3) .. ":" .. tag .. ":" .. i .. ":" .. key
end

-- Delete an item's vector documents from the i-th on (they are numbered from 0 without a
-- gap): one DEL of a missing key for an item without any.
local function store_drop_docs(key, from)
  local i = from
  while redis.call("DEL", store_doc_key(key, i)) == 1 do
    i = i + 1
  end
end

-- Write an item's vector documents from its vectors (vectors.py: a 4-byte dims, then float32s)
-- and its namespace's tags (keys.py namespace_tags), replacing the ones it had. A zero vector
-- gets no `vec` (the cosine of a zero vector is NaN to the server, 0 to the store) and tags
-- marked `z`, so that a search finds it apart.
local function store_write_docs(key, blob, tags)
  local b1, b2, b3, b4 = string.byte(blob, 1, 4)
  local size = 4 * (b1 + 256 * b2 + 65536 * b3 + 16777216 * b4)
  local count = (#blob - 4) / size
  local zero = string.rep("\0", size)
  local zero_tags = "z" .. string.gsub(tags, ",", ",z")
  for i = 0, count - 1 do
    local doc = store_doc_key(key, i)
    local vec = string.sub(blob, 5 + i * size, 4 + (i + 1) * size)
    redis.call("DEL", doc)
    if vec == zero then
      redis.call("HSET", doc, "ns", zero_tags)
    else
      redis.call("HSET", doc, "vec", vec, "ns", tags)
    end
  end
  store_drop_docs(key, count)
end

local function store_drop(key)
  redis.call("HDEL", KEYS[1], key)
  redis.call("HDEL", KEYS[2], key)
  redis.call("ZREM", KEYS[3], key)
  redis.call("ZREM", KEYS[4], key)
  redis.call("HDEL", KEYS[5], key)
  redis.call("HDEL", KEYS[6], key)
  if redis.call("SREM", KEYS[7], key) == 1 then store_drop_docs(key, 0) end
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

-- Give an item read its TTL anew (refresh_on_read), when it has one.
local function store_refresh(key, now)
  local ttl = redis.call("HGET", KEYS[5], key)
  if ttl then
    redis.call("ZADD", KEYS[4], now + tonumber(ttl), key)
  end
end
