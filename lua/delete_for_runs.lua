#!lua flags=allow-oom
--[[
  delete_for_runs: remove, within one thread, every checkpoint written by the given runs,
  with its writes, its index entries and the blobs no remaining checkpoint references.

  KEYS[1]  P:th:{T}         thread root (SET of namespaces)
  KEYS[2]  P:runs:{T}       run ids of the thread
  KEYS[3]  P:gc:{T}         gc root

  ARGV[1]  prefix P   ARGV[2]  hash tag {T}   ARGV[3]  budget of this call (see reap_thread)
  ARGV[4]  staging token ("": none)
  ARGV[5..]  run ids (encoded): a chunk of them

  Counts: KEYS 3; ARGV 4..
  Built by: core/calls.py delete_for_runs()
  Reply: the number of jobs still pending (0: done)

  Many runs: the client sends them a chunk per call, with one token. Calls but the last have
  budget 0 and only stage their runs in P:gc:{T}:s:<token> (a set; it expires after a day);
  the last call moves the staged runs and its own into the job at once. No job holds part of
  the request before the last call: a reap of the thread between the calls (a put that
  replies REAPING, another client's delete, prune or check) would otherwise start the job
  with only the runs it had, and a later chunk's runs would go into a second job that never
  looks again at the checkpoints the first kept for them (delta channels). A client that dies
  before its last call deletes nothing; its staged runs expire.

  In steps (include/reap_runs.lua): the runs' checkpoints are collected, then every
  namespace they are in is walked once to find what must stay, then they are dropped, each
  with its keys in one step; a run whose checkpoints fit in one step goes atomically.

  Delta channels: a checkpoint that stays may rebuild a LangGraph DeltaChannel from writes
  and a seed stored at ancestors written by one of the runs (see include/delta.lua). Such
  ancestors are kept, so every checkpoint that stays rebuilds exactly the state it had: for
  every remaining checkpoint whose parent is to go, the ancestors its delta channels read
  (delta_dependencies) stay, and so, in turn, do the ancestors those read. A kept checkpoint
  keeps its run index entry, so the same call can remove it once nothing depends on it.
  Threads without delta channels lose every checkpoint of the runs.
]]
-- requires: keyschema, refs, jobs, reap

local prefix, tag = ARGV[1], ARGV[2]

-- The thread's newest job when it is a runs job that has not begun to walk (more runs may join
-- it: each namespace is walked once for all of them), else a new runs job.
local function collecting_runs_job(gc)
  local newest = 0
  for _, job in ipairs(redis.call("SMEMBERS", gc)) do
    local k = tonumber(string.match(job, ":(%d+)$"))
    if k and k > newest then newest = k end
  end
  if redis.call("SISMEMBER", gc, "runs:" .. newest) == 1 then
    local G = jobspace(prefix, tag, newest)
    local phase = redis.call("HGET", G.state, "ph")
    if not phase or phase == "collect" then return G end
  end
  return jobspace(prefix, tag, new_job(gc, "runs"))
end

local budget, token = tonumber(ARGV[3]), ARGV[4]
local staged = (token ~= "") and (prefix .. ":gc:" .. tag .. ":s:" .. token)
local runs = {}
for i = 5, #ARGV do
  if redis.call("SISMEMBER", KEYS[2], ARGV[i]) == 1 then runs[#runs + 1] = ARGV[i] end
end
if budget == 0 and staged then  -- not the last call: stage the runs, start nothing
  if #runs > 0 then
    add_members(staged, runs)
    redis.call("EXPIRE", staged, 86400)
  end
  return redis.call("SCARD", KEYS[3])
end
if #runs > 0 or (staged and redis.call("EXISTS", staged) == 1) then
  local job_runs = collecting_runs_job(KEYS[3]).part("runs")
  if #runs > 0 then add_members(job_runs, runs) end
  if staged then  -- (SUNIONSTORE: staged runs may be more than unpack() takes)
    redis.call("SUNIONSTORE", job_runs, job_runs, staged)
    redis.call("UNLINK", staged)
  end
end
return reap(prefix, tag, budget)
