-- requires: refs, record, indexes, ledger, jobs
-- The ttl job (set_thread_ttl; see jobs.lua).

-- set_thread_ttl: every key of the thread gets the new expiry (0: none), namespace by
-- namespace (G todo, a copy of the root taken when the job began), a chunk at a time.
local function reap_ttl(K, prefix, tag, G, budget)
  local ttl = tonumber(redis.call("HGET", G.state, "ttl")) or 0
  local phase, cursor, current = load_progress(G, "i", "")
  local used = 0
  local seen = {}
  -- the deadlines written anew, under the new setting (include/ledger.lua; set_thread_ttl.lua
  -- changed P:ttl before the job began)
  local now, setting = ttl > 0 and now_seconds() or 0, ttl_setting(K)
  local function apply(key)
    if seen[key] then return end
    seen[key] = true
    used = used + 1
    if ttl > 0 then redis.call("EXPIRE", key, ttl) else redis.call("PERSIST", key) end
  end
  while used < budget and phase ~= "runs" do
    local ns = current or redis.call("SRANDMEMBER", G.part("todo"))
    if not ns then
      phase, cursor = "runs", "0"
      break
    end
    current = ns
    local bi = K.loose_blobs(ns)
    if phase == "i" then
      local lower = (cursor == "") and "-" or ("(" .. cursor)
      local ids = redis.call("ZRANGE", K.index(ns), lower, "+", "BYLEX", "LIMIT", 0, 200)
      for _, id in ipairs(ids) do
        local cp = K.checkpoint(ns, id)
        -- (unreadable: its own keys get the expiry; its blobs and indexes are unknown)
        local fields = readable_record_fields(cp, "bv", "ix") or {}
        apply(cp)
        if redis.call("EXISTS", cp) == 1 then
          redis.call("HSET", K.ledger(ns), id, ledger_entry(ttl, now, setting))
        end
        apply(K.writes(ns, id))
        for _, ref in ipairs(split_refs(fields[1])) do apply(K.blob(ns, ref)) end
        for _, suffix in ipairs(split_refs(fields[2])) do
          local by_value = by_value_suffix(suffix)
          local index = by_value and K.threads_with(by_value) or K.metadata_index(suffix)
          if not seen[index] then
            seen[index] = true
            local own = ttl == 0 and -1 or ttl * 1000
            if by_value then
              used = used + settle_threads_index(K, index, own)
            else
              used = used + settle_metadata_index(prefix, tag, index, own)
            end
          end
        end
        used = used + 2
      end
      if #ids < 200 then phase, cursor = "w", "0" else cursor = ids[#ids] end
    else
      local set = (phase == "w") and K.writes_index(ns) or bi
      local reply = redis.call("SSCAN", set, cursor, "COUNT", 500)
      for _, member in ipairs(reply[2]) do
        apply((phase == "w") and K.writes(ns, member) or K.blob(ns, member))
      end
      used = used + 2
      cursor = reply[1]
      if cursor == "0" then
        if phase == "w" then
          phase = "b"
        else
          apply(K.index(ns))
          apply(K.ledger(ns))
          apply(K.writes_index(ns))
          apply(bi)
          redis.call("SREM", G.part("todo"), ns)
          phase, cursor, current = "i", "", false
        end
      end
    end
  end
  while used < budget and phase == "runs" do
    local reply = redis.call("SSCAN", K.runs, cursor, "COUNT", 500)
    for _, run in ipairs(reply[2]) do apply(K.run(run)) end
    used = used + 2
    cursor = reply[1]
    if cursor == "0" then
      apply(K.runs)
      apply(K.thread)
      apply(K.values)
      apply(K.bounds)
      return used, true
    end
  end
  save_progress(G, phase, cursor, current)
  return used, false
end
