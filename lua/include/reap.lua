-- requires: keyschema, reap_whole, reap_prune, reap_runs, reap_ttl
-- One step of a thread's jobs, oldest first (see jobs.lua).

-- One step of the thread's jobs, oldest first, within `budget`. Returns the number of jobs
-- still pending (0: the gc root is gone). `only` (optional): a job, reaped alone while it is
-- the oldest and its state holds `token` (0 once it is not).
local function reap(prefix, tag, budget, only, token)
  local K = keyspace(prefix, tag)
  local used = 0
  while used < budget do
    local jobs = redis.call("SMEMBERS", K.gc)
    if #jobs == 0 then return 0 end
    local job, n = nil, nil
    for _, j in ipairs(jobs) do
      local k = tonumber(string.match(j, ":(%d+)$"))
      if not n or k < n then job, n = j, k end
    end
    local kind = string.match(job, "^(%a+):")
    local G = jobspace(prefix, tag, n)
    if only and (job ~= only or redis.call("HGET", G.state, "tok") ~= token) then return 0 end
    -- a copy being discarded is marked at once: its chunks and publish are refused from the
    -- first step on, not only once the job is gone (a step unlinks part of it)
    if kind == "copy" then redis.call("HSET", G.state, "x", "1") end
    local spent, done
    if kind == "del" or kind == "copy" then
      spent, done = reap_whole(K, prefix, tag, G, budget - used, kind)
    elseif kind == "prune" then
      spent, done = reap_prune(K, prefix, tag, G, budget - used)
    elseif kind == "runs" then
      spent, done = reap_runs(K, prefix, tag, G, budget - used)
    elseif kind == "ttl" then
      spent, done = reap_ttl(K, prefix, tag, G, budget - used)
    else
      spent, done = 0, true  -- unknown: written by a newer version; nothing to do here
    end
    used = used + spent + 2
    if not done then return #jobs end
    -- the job's containers are empty by now (or hold nothing of value): drop them
    for _, part in ipairs({ "th", "runs", "tv", "todo", "reap", "ns", "walk" }) do
      redis.call("UNLINK", G.part(part))
    end
    redis.call("UNLINK", G.state)
    redis.call("SREM", K.gc, job)
  end
  return redis.call("SCARD", K.gc)
end
