#!lua flags=allow-oom
--[[
  thread_deadlines: the registry of live threads (P:alive), which tells a thread the server
  evicted whole from one that never existed or expired. Eviction can take every key under a
  thread's hash tag; no key in its slot is then left to say it existed, so this registry
  lives outside it. It holds no expiry: a volatile-* policy never evicts it.

  KEYS[1]  P:alive          the registry (ZSET: hash tag {T} -> the unix second until which
                            the thread's keys are due: what a put of its graph's own
                            namespace replied, never later than any key the put kept alive;
                            or, for FORGET_HOLD seconds after a delete, minus the second that
                            hold ends)

  ARGV[1]  "note", then a deadline and a tag {T}: a put's deadline (the later one stays:
           expiries only grow), unless the thread was deleted less than FORGET_HOLD
           seconds ago (a put that raced the delete would note a thread that is gone); then
           up to SWEEP entries whose deadline or hold passed leave (bounded work: every thread
           is noted before its deadline passes, so the sweep keeps up); reply 1 when the
           registry holds the deadline (or a later one), 0 when the hold refused it
  ARGV[1]  "forget", then tags {T}: threads a ttl change left without a deadline to keep
           (ZREM); reply the number removed
  ARGV[1]  "deleted", then tags {T}: threads just deleted, forgotten and held as above; then
           up to SWEEP passed entries leave, as after a note; reply the number of tags
  ARGV[1]  "set", then seconds and a tag {T}: the thread's deadline is that many seconds from
           the server's clock, whatever it was (a ttl job gave every key of the thread its new
           expiry; the client takes off the time the job took); reply 1
  ARGV[1]  "due", then one tag {T}: reply its deadline when it is more than REGISTRY_GRACE
           seconds ahead of the server's clock, else nil (an entry that passed leaves;
           include/registry.lua, which get_tuple.lua and list_checkpoints.lua ask on a
           standalone server)
  ARGV[2..] what follows the mode, as above
  Counts: KEYS 1; ARGV 2..
  Built by: core/calls.py thread_deadlines()
]]
-- requires: registry

-- seconds a forgotten thread refuses notes: a put's note that comes after a delete
local FORGET_HOLD = 60
local SWEEP = 16

local now = tonumber(redis.call("TIME")[1])
local mode = ARGV[1]

-- Up to SWEEP entries whose deadline, or hold, passed leave.
local function sweep()
  local passed = redis.call("ZRANGEBYSCORE", KEYS[1], "(" .. -now, "(" .. now, "LIMIT", 0, SWEEP)
  if #passed > 0 then redis.call("ZREM", KEYS[1], unpack(passed)) end
end
if mode == "note" then
  local deadline, tag = tonumber(ARGV[2]), ARGV[3]
  local score = tonumber(redis.call("ZSCORE", KEYS[1], tag))
  local held = score ~= nil and score < -now
  if not held and (score == nil or deadline > score) then
    redis.call("ZADD", KEYS[1], deadline, tag)
  end
  sweep()
  return held and 0 or 1
elseif mode == "set" then
  redis.call("ZADD", KEYS[1], now + tonumber(ARGV[2]), ARGV[3])
  return 1
elseif mode == "forget" then
  return redis.call("ZREM", KEYS[1], unpack(ARGV, 2))
elseif mode == "deleted" then
  local hold = {}
  for i = 2, #ARGV do
    hold[#hold + 1] = -(now + FORGET_HOLD)
    hold[#hold + 1] = ARGV[i]
  end
  redis.call("ZADD", KEYS[1], unpack(hold))
  sweep()
  return #ARGV - 1
end
return registry_due(KEYS[1], ARGV[2], now)
