-- requires:
-- Expiry: giving keys their ttl, keeping shared keys alive as long as what needs them, and a
-- thread's own ttl setting.

-- Give a key that was just written or read its expiry (ttl 0: none).
local function expire(key, ttl)
  if ttl > 0 then redis.call("EXPIRE", key, ttl) end
end

-- Whether `key` is about to be created, as keep_alive needs to know: without a ttl it does
-- not matter (keep_alive then persists the key either way), so that costs no call.
local function is_new(key, ttl)
  return ttl == 0 or redis.call("EXISTS", key) == 0
end

-- Keep a key alive at least as long as what was just written into it, or what depends on it
-- (ttl 0: forever). Expiries only ever grow here: an index, a blob or a metadata index may be
-- shared with checkpoints written under a longer ttl, or none (a saver without ttl, a pinned
-- thread), and must outlive them. `left` is the key's PTTL when the caller has it.
local function keep_alive(key, ttl, created, left)
  if ttl == 0 then
    if created or left ~= -1 then redis.call("PERSIST", key) end
  elseif created then
    redis.call("EXPIRE", key, ttl)
  else
    left = left or redis.call("PTTL", key)
    if left >= 0 and left < ttl * 1000 then redis.call("EXPIRE", key, ttl) end
  end
end

-- The longer of two remaining lives in ms (-1: forever).
local function longer(a, b)
  if a == -1 or b == -1 then return -1 end
  return a > b and a or b
end

-- Add `refs` to namespace ns's loose-blob set (see K.loose_blobs), `lefts` the PTTLs of their
-- blobs (ms, -1: no expiry); the set lives as long as its longest-lived member.
local function add_loose(K, ns, refs, lefts)
  if #refs == 0 then return end
  local key = K.loose_blobs(ns)
  local created = redis.call("EXISTS", key) == 0
  local longest = 0
  for j = 1, #refs do longest = longer(longest, lefts[j]) end
  for first = 1, #refs, 4000 do  -- unpack() has a limit of a few thousand values
    redis.call("SADD", key, unpack(refs, first, math.min(first + 3999, #refs)))
  end
  keep_alive(key, longest == -1 and 0 or math.ceil(longest / 1000), created)
end

-- The expiry of one thread: its own setting (P:ttl:{T}, "0" when pinned) wins over the
-- saver's default. An active thread's own setting is refreshed with the rest of its keys.
-- Second: the setting as stored, "-" for none (what include/ledger.lua's entries name).
local function thread_ttl(K, default)
  local own = redis.call("GET", K.ttl)
  if not own then return default, "-" end
  local ttl = tonumber(own)
  expire(K.ttl, ttl)
  return ttl, own
end
