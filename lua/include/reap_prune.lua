-- requires: refs, expiry, record, drop, delta, jobs
-- The prune job (keep_latest; see jobs.lua).

-- prune (keep_latest), one namespace: swap in a fresh index holding only what stays (the
-- latest checkpoint and the ancestors its delta channels read), so readers see the pruned
-- namespace at once; the old indexes become the job's and are reaped in steps. Checkpoints
-- whose record cannot be read stay (see drop_checkpoint): the latest is the newest readable
-- one, and those newer than it stay with it.
local function prune_swap(K, prefix, tag, G, ns)
  local index, wi, bi = K.index(ns), K.writes_index(ns), K.loose_blobs(ns)
  local latest  -- the newest entry whose checkpoint is there (dangling entries may lead)
  local unreadable = {}
  local seen, upper = 0, "+"
  while not latest and seen < 5000 do  -- about 2 ms at most
    local ids = redis.call("ZREVRANGEBYLEX", index, upper, "-", "LIMIT", 0, 500)
    if #ids == 0 then break end
    for _, id in ipairs(ids) do
      local cp = K.checkpoint(ns, id)
      if redis.call("EXISTS", cp) == 1 then
        if readable_record_fields(cp, "p") then
          latest = id
          break
        end
        unreadable[#unreadable + 1] = id
      end
    end
    seen = seen + #ids
    upper = "(" .. ids[#ids]
  end
  if not latest and seen >= 5000 then
    return 10 + seen  -- not found yet: keep the namespace as it is rather than guess
  end
  local keep = unreadable
  if latest then
    keep[#keep + 1] = latest
    for _, id in ipairs(delta_dependencies(K, ns, latest)) do keep[#keep + 1] = id end
  end
  local left = redis.call("PTTL", index)
  if redis.call("EXISTS", index) == 1 then redis.call("RENAME", index, G.ns_part("i", ns)) end
  if redis.call("EXISTS", wi) == 1 then redis.call("RENAME", wi, G.ns_part("w", ns)) end
  -- loose blobs go with the old indexes: whatever no kept checkpoint references goes
  if redis.call("EXISTS", bi) == 1 then redis.call("RENAME", bi, G.ns_part("b", ns)) end
  for _, id in ipairs(keep) do
    redis.call("ZADD", index, 0, id)
    if redis.call("EXISTS", K.writes(ns, id)) == 1 then redis.call("SADD", wi, id) end
    local fields = readable_record_fields(K.checkpoint(ns, id), "bv")
    add_members(G.ns_part("k", ns), split_refs(fields and fields[1]))
  end
  for _, key in ipairs({ index, wi }) do copy_expiry(left, key) end
  redis.call("SADD", G.part("reap"), ns)
  return 10 + 5 * #keep
end

-- prune, one namespace after its swap: what the old indexes list and the new ones do not.
-- the blobs of refs no kept checkpoint references (not in the set kept) go; a kept one
-- whose ttl in ms (PTTL) satisfies stays_loose(ttl) is recorded as loose again
local function sweep_blobs(K, ns, kept, refs, stays_loose)
  local again, lefts = {}, {}
  for _, ref in ipairs(refs) do
    if redis.call("SISMEMBER", kept, ref) == 0 then
      redis.call("UNLINK", K.blob(ns, ref))
    else
      local left = redis.call("PTTL", K.blob(ns, ref))
      if stays_loose(left) then
        again[#again + 1] = ref
        lefts[#lefts + 1] = left
      end
    end
  end
  add_loose(K, ns, again, lefts)
end

local function prune_reap(K, prefix, tag, G, ns, budget)
  local index = K.index(ns)
  local old_i, old_w, old_b = G.ns_part("i", ns), G.ns_part("w", ns), G.ns_part("b", ns)
  local kept, dropped = G.ns_part("k", ns), G.ns_part("c", ns)
  local used = 0
  while used < budget do
    local ids = redis.call("ZRANGE", old_i, 0, 199)
    if #ids == 0 then break end
    for _, id in ipairs(ids) do
      if not redis.call("ZSCORE", index, id) then
        local refs = {}
        if not drop_checkpoint(K, ns, id, refs) then  -- unreadable: it stays, with its writes
          redis.call("ZADD", index, 0, id)
          if redis.call("EXISTS", K.writes(ns, id)) == 1 then
            redis.call("SADD", K.writes_index(ns), id)
          end
        end
        for ref in pairs(refs) do redis.call("SADD", dropped, ref) end  -- candidates
        used = used + 8
      end
      used = used + 1
    end
    redis.call("ZREM", old_i, unpack(ids))
  end
  while used < budget do  -- writes of checkpoints that are gone or never were (orphans)
    local ids = take(old_w, 200)
    if #ids == 0 then break end
    for _, id in ipairs(ids) do
      if not redis.call("ZSCORE", index, id) then
        redis.call("UNLINK", K.writes(ns, id))
        redis.call("SREM", K.writes_index(ns), id)
      end
    end
    used = used + 2 * #ids + 2
  end
  while used < budget do  -- blobs no kept checkpoint references
    local refs = take(dropped, 500)
    if #refs == 0 then break end
    -- how long the kept checkpoints live: the longest of them (-1: one never expires)
    local kept_left = 0
    for _, id in ipairs(redis.call("ZRANGE", index, 0, 99)) do
      kept_left = longer(kept_left, redis.call("PTTL", K.checkpoint(ns, id)))
    end
    -- kept, but renewed by a dropped checkpoint past what the kept ones live: loose
    sweep_blobs(K, ns, kept, refs, function(left)
      return kept_left >= 0 and (left == -1 or left > kept_left)
    end)
    used = used + 3 * #refs + 3
  end
  while used < budget do
    -- the loose blobs: those no kept checkpoint references go; the others stay loose, as
    -- they may outlive the kept checkpoints (written without a ttl, or with a longer one)
    local refs = take(old_b, 500)
    if #refs == 0 then break end
    sweep_blobs(K, ns, kept, refs, function(left) return left ~= -2 end)
    used = used + 3 * #refs + 2
  end
  if used >= budget then return used, false end
  redis.call("UNLINK", kept)
  forget_empty_namespace(K, ns)
  return used + 2, true
end

local function reap_prune(K, prefix, tag, G, budget)
  local used = 0
  -- every swap first: the whole thread looks pruned as early as possible
  while used < budget do
    local ns = redis.call("SRANDMEMBER", G.part("todo"))
    if not ns then break end
    used = used + prune_swap(K, prefix, tag, G, ns)
    redis.call("SREM", G.part("todo"), ns)
  end
  while used < budget do
    local ns = redis.call("SRANDMEMBER", G.part("reap"))
    if not ns then break end
    local spent, done = prune_reap(K, prefix, tag, G, ns, budget - used)
    used = used + spent + 1
    if done then redis.call("SREM", G.part("reap"), ns) end
  end
  return used, used < budget
end
