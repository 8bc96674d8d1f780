-- requires: replies, keyschema, expiry, indexes
-- Threads-by-value lists on a Redis Cluster.
--
-- A cluster keeps the lists P:tm:S (S: a metadata value's suffix, or "/<run>" for a run) as a
-- standalone server does, but a thread's script cannot write them: they live in other slots.
-- So the client writes a thread's entry *before* the checkpoints that need it (write-ahead:
-- a client that dies in between leaves an entry too many, never one too few), and the thread
-- keeps in K.bounds (P:tb:{T}, a HASH, in its own slot) what its entries are known to hold:
--   ""  -> inc: the thread's incarnation, a random word its first listed checkpoint chose; it
--          goes with K.bounds (delete, a thread emptied, expiry) and is never chosen again,
--          so an entry "{T}<inc>" whose inc the thread no longer has is dead for good, and
--          anyone may remove it without a race
--   S   -> bound: list S holds "{T}<inc>" with a score of at least this
--   @S  -> newest: the highest id_score() of the checkpoints with S written under inc, at most
--          the bound: what a reader asks a thread (thread_lists.lua) before it visits it, as
--          the bound is loose by the margin ("@" never starts an S: enc() writes it %40)
-- A checkpoint is written only when every list it needs holds the thread with a score of at
-- least its id_score(); else its script writes nothing and replies
-- { "INDEX", inc, S, score, ... }, the client enters the thread in those lists (ZADD GT, a
-- margin above the score, so that an active thread does this rarely) and sends the call
-- again with the hint "<inc>;S=bound,S=bound;<candidate>" of what it wrote: the incarnation
-- it wrote under, the bounds, and a random word never sent before, the incarnation of a
-- thread that has none (a fresh one each time: an old one may have been the incarnation of a
-- thread deleted meanwhile, whose entries someone is removing).

-- A score as stored in K.bounds and in a hint ("inf" or an integer).
local function parse_score(s)
  if s == "inf" then return math.huge end
  return tonumber(s)
end

-- Add to `needs` (S -> the score the list must have) what a record field asks for: a metadata
-- value thread_indexed() takes, or the run ("r", encoded) of checkpoint `id`.
local function add_list_needs(needs, name, value, id)
  local suffix
  if name == "r" then
    suffix = "/" .. value
  elseif string.sub(name, 1, 2) == "m:" and thread_indexed(string.sub(name, 3), value) then
    suffix = enc(string.sub(name, 3)) .. ":" .. enc(value)
  else
    return
  end
  local score = id_score(id)
  if not needs[suffix] or needs[suffix] < score then needs[suffix] = score end
end

-- A thread writes a run per LangGraph turn: K.bounds keeps the bounds of its newest
-- RUN_BOUNDS runs only, so that it stays small. Forgetting one is safe: the entry stays in the
-- run's list (until the incarnation goes), and a checkpoint of that run written again writes
-- it ahead again. (A reader does not ask a thread for a run's newest score for that reason:
-- a run's list is visited whole, it holds a few threads.)
local RUN_BOUNDS = 8
local function forget_old_runs(K)
  local flat = redis.call("HGETALL", K.bounds)
  local runs = {}
  for j = 1, #flat, 2 do
    if string.byte(flat[j], 1) == 47 then runs[#runs + 1] = { flat[j], parse_score(flat[j + 1]) } end
  end
  if #runs <= RUN_BOUNDS then return end
  table.sort(runs, function(a, b) return a[2] < b[2] end)
  for j = 1, #runs - RUN_BOUNDS do redis.call("HDEL", K.bounds, runs[j][1], "@" .. runs[j][1]) end
end

-- nil when the thread's entries cover `needs` (recording the bounds the client wrote ahead,
-- as `hint` says, the newest scores, and keeping K.bounds alive `ttl` seconds more), and the
-- number of bounds recorded; else the "INDEX" reply, with nothing written but a new
-- incarnation (the hint's candidate, when the thread has none).
local function cover(K, hint, needs, ttl)
  local suffixes, fields = {}, { "" }
  for suffix in pairs(needs) do suffixes[#suffixes + 1] = suffix end
  if #suffixes == 0 then return nil, 0 end
  table.sort(suffixes)
  for _, suffix in ipairs(suffixes) do
    fields[#fields + 1] = suffix
    fields[#fields + 1] = "@" .. suffix
  end
  local hint_inc, written, candidate = string.match(hint, "^([^;]*);([^;]*);(.*)$")
  local have = {}  -- (HMGET 4,000 fields at a time: unpack() fails beyond about 8,000)
  for first = 1, #fields, 4000 do
    local last = math.min(first + 3999, #fields)
    local part = redis.call("HMGET", K.bounds, unpack(fields, first, last))
    for j = 1, #part do have[#have + 1] = part[j] end
  end
  local inc, fresh = have[1], not have[1]
  if fresh then  -- (its entries of an incarnation gone are no help: all of them are missing)
    inc = candidate
    redis.call("HSET", K.bounds, "", inc)
    keep_alive(K.bounds, ttl, true)
  end
  local ahead = {}
  if not fresh and inc == hint_inc then
    for suffix, bound in string.gmatch(written, "([^,=]+)=([^,]+)") do
      ahead[suffix] = bound
    end
  end
  local missing, record, recorded, new_run = { INDEX, inc }, {}, 0, false
  for j, suffix in ipairs(suffixes) do
    local want, bound, newest = needs[suffix], have[2 * j], have[2 * j + 1]
    if not (bound and parse_score(bound) >= want) then
      if ahead[suffix] and parse_score(ahead[suffix]) >= want then
        record[#record + 1] = suffix
        record[#record + 1] = ahead[suffix]
        recorded = recorded + 1
        new_run = new_run or string.byte(suffix, 1) == 47  -- "/"
      else
        missing[#missing + 1] = suffix
        missing[#missing + 1] = score_arg(want)
      end
    end
    if not (newest and parse_score(newest) >= want) then
      record[#record + 1] = "@" .. suffix
      record[#record + 1] = score_arg(want)
    end
  end
  if #missing > 2 then return missing end
  for first = 1, #record, 4000 do  -- (field, value) pairs: 4,000 values keep them whole
    redis.call("HSET", K.bounds, unpack(record, first, math.min(first + 3999, #record)))
  end
  keep_alive(K.bounds, ttl, false)
  if new_run then forget_old_runs(K) end
  return nil, recorded
end
