#!lua flags=allow-oom
--[[
  thread_deadlines: the registry of live threads (P:alive), which tells a thread the server
  evicted whole from one that never existed or expired. Eviction can take every key under a
  thread's hash tag; no key in its slot is then left to say it existed, so this registry
  lives outside it. It holds no expiry: a volatile-* policy never evicts it.

  KEYS[1]  P:alive          the registry (ZSET: hash tag {T} -> the unix second until which
                            the thread's keys are due: what a put of its graph's own
                            namespace replied, never later than any key the put kept alive)

  ARGV[1]  "note", then pairs (deadline, {T}): a put's deadlines (ZADD GT: expiries only
           grow); then up to SWEEP entries whose deadline passed leave (bounded work: every
           thread is noted before its deadline passes, so the sweep keeps up); reply the
           number swept
  ARGV[1]  "forget", then tags {T}: threads that a delete or another setting left without
           a deadline to keep (ZREM); reply the number removed
  ARGV[1]  "due", then one tag {T}: reply its deadline when it has not passed (by the
           server's clock), else nil (an entry that passed leaves)
  ARGV[2..] what follows the mode, as above
  Counts: KEYS 1; ARGV 2..
  Built by: core/calls.py thread_deadlines()
]]
-- requires:

local SWEEP = 16

local now = tonumber(redis.call("TIME")[1])
local mode = ARGV[1]
if mode == "note" then
  for first = 2, #ARGV, 4000 do  -- (unpack() fails beyond about 8,000 values)
    redis.call("ZADD", KEYS[1], "GT", unpack(ARGV, first, math.min(first + 3999, #ARGV)))
  end
  local passed = redis.call("ZRANGEBYSCORE", KEYS[1], "-inf", "(" .. now, "LIMIT", 0, SWEEP)
  if #passed > 0 then redis.call("ZREM", KEYS[1], unpack(passed)) end
  return #passed
elseif mode == "forget" then
  return redis.call("ZREM", KEYS[1], unpack(ARGV, 2))
end
local deadline = tonumber(redis.call("ZSCORE", KEYS[1], ARGV[2]))
if not deadline then return nil end
if deadline > now then return deadline end
redis.call("ZREM", KEYS[1], ARGV[2])
return nil
