-- requires:
-- The registry of live threads (P:alive, a ZSET: thread tag -> the unix second until which
-- its keys are due, or minus the second a delete's hold ends; thread_deadlines.lua writes
-- it). What a read that found no key of a thread asks it.

-- Seconds of grace of a deadline: on a cluster the thread's node and the registry's node
-- each have a clock of their own.
local REGISTRY_GRACE = 2

-- The deadline of thread `tag` in the registry `key` when it is more than REGISTRY_GRACE
-- seconds after `now` (the server's unix second), else nil; an entry whose deadline passed
-- leaves (a hold stays: it is negative).
local function registry_due(key, tag, now)
  local deadline = tonumber(redis.call("ZSCORE", key, tag))
  if not deadline then return nil end
  if deadline > now + REGISTRY_GRACE then return deadline end
  if deadline > 0 and deadline <= now then redis.call("ZREM", key, tag) end
  return nil
end
