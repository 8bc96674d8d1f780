-- requires: refs, record, drop, delta, jobs
-- The runs job (delete_for_runs; see jobs.lua).

-- delete_for_runs: (1) collect the runs' checkpoints into per-namespace doomed sets (d:N);
-- (2) walk each such namespace once, sparing the ancestors that a remaining checkpoint
-- rebuilds its delta channels from and noting every blob a remaining checkpoint references
-- (l:N); (3) drop the doomed checkpoints and the blobs only they referenced. Nothing is
-- removed before the walk is over, so a spared checkpoint never disappears.
local function spare(K, ns, G, first)
  local doomed, live = G.ns_part("d", ns), G.ns_part("l", ns)
  local queue, head, used = { first }, 1, 0
  while head <= #queue do
    for _, dep in ipairs(delta_dependencies(K, ns, queue[head])) do
      used = used + 4
      if redis.call("SREM", doomed, dep) == 1 then
        local fields = readable_record_fields(K.checkpoint(ns, dep), "bv")
        add_members(live, split_refs(fields and fields[1]))
        queue[#queue + 1] = dep
      end
    end
    head = head + 1
  end
  return used
end

local function reap_runs(K, prefix, tag, G, budget)
  local used = 0
  local phase, cursor, current = load_progress(G, "collect", "0")
  while used < budget and phase == "collect" do
    local run = current or redis.call("SRANDMEMBER", G.part("runs"))
    if not run then
      phase, cursor = "walk", ""
      break
    end
    current = run
    local reply = redis.call("SSCAN", K.run(run), cursor, "COUNT", 500)
    for _, member in ipairs(reply[2]) do
      local sep = string.find(member, ":", 1, true)
      local ns, id = string.sub(member, 1, sep - 1), string.sub(member, sep + 1)
      -- an entry whose record now names another run is stale (a record replaced by an
      -- earlier version's copy kept it): the checkpoint is not this run's
      local cp = K.checkpoint(ns, id)
      local fields = readable_record_fields(cp, "r")  -- (unreadable: taken as the run's)
      if fields and fields[1] ~= run and redis.call("EXISTS", cp) == 1 then
        redis.call("SREM", K.run(run), member)
      else
        redis.call("SADD", G.ns_part("d", ns), id)
        redis.call("SADD", G.part("ns"), ns)
        redis.call("SADD", G.part("walk"), ns)
      end
    end
    used = used + 5 * #reply[2] + 2
    cursor = reply[1]
    if cursor == "0" then
      redis.call("SREM", G.part("runs"), run)
      current = false
    end
  end
  while used < budget and phase == "walk" do
    local ns = current or redis.call("SRANDMEMBER", G.part("walk"))
    if not ns then
      phase = "drop"
      break
    end
    current = ns
    local doomed, live = G.ns_part("d", ns), G.ns_part("l", ns)
    local lower = (cursor == "") and "-" or ("(" .. cursor)
    local ids = redis.call("ZRANGE", K.index(ns), lower, "+", "BYLEX", "LIMIT", 0, 200)
    for _, id in ipairs(ids) do
      if redis.call("SISMEMBER", doomed, id) == 0 then
        -- (unreadable: its blobs and parent unknown; it stays, see drop_checkpoint)
        local fields = readable_record_fields(K.checkpoint(ns, id), "p", "bv") or {}
        add_members(live, split_refs(fields[2]))
        if fields[1] and redis.call("SISMEMBER", doomed, fields[1]) == 1 then
          used = used + spare(K, ns, G, id)
        end
        used = used + 3
      end
      used = used + 1
    end
    if #ids < 200 then
      redis.call("SREM", G.part("walk"), ns)
      current, cursor = false, ""
    else
      cursor = ids[#ids]
    end
  end
  while used < budget and phase == "drop" do
    local ns = redis.call("SRANDMEMBER", G.part("ns"))
    if not ns then
      phase = "done"
      break
    end
    local live, bi = G.ns_part("l", ns), K.loose_blobs(ns)
    local ids = take(G.ns_part("d", ns), 200)
    for _, id in ipairs(ids) do
      local refs = {}
      drop_checkpoint(K, ns, id, refs)
      for ref in pairs(refs) do
        if redis.call("SISMEMBER", live, ref) == 0 then
          redis.call("UNLINK", K.blob(ns, ref))
          redis.call("SREM", bi, ref)
        end
        used = used + 2
      end
      used = used + 8
    end
    if #ids < 200 then
      forget_empty_namespace(K, ns, true)  -- (the registry may hold the thread due)
      redis.call("UNLINK", live)
      redis.call("SREM", G.part("ns"), ns)
    end
  end
  if phase == "done" then return used, true end
  save_progress(G, phase, cursor, current)
  return used, false
end
