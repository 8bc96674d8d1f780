#!lua flags=allow-oom
--[[
  set_thread_ttl: give one thread its own expiry, pin it (never expires), or return it to the
  saver's default; every key the thread has gets the new expiry, in bounded steps (this call
  does the first, reap_thread.lua the rest; writers of the thread wait until it is done).

  KEYS[1]  P:th:{T}         thread root (SET of namespaces)
  KEYS[2]  P:runs:{T}       run ids of the thread
  KEYS[3]  P:ttl:{T}        the thread's own setting
  KEYS[4]  P:gc:{T}         gc root

  ARGV[1]  prefix P   ARGV[2]  hash tag {T}
  ARGV[3]  mode: "own" (ARGV[4] seconds; 0 pins the thread) | "default" (forget the thread's
           own setting; ARGV[4] is the saver's default, 0 for none)
  ARGV[4]  seconds
  ARGV[5]  budget of this call (see reap_thread)

  Counts: KEYS 4; ARGV 5
  Built by: core/calls.py set_thread_ttl()
  Reply: the number of jobs still pending (0: done)

  Global metadata indexes (P:mi:*) are shared by every thread, so they only ever get a longer
  expiry here (a persistent one stays persistent), except a persistent one whose members (at
  most 64) are all this thread's, which follows the thread's new expiry.
]]
-- requires: keyschema, expiry, jobs, reap

local prefix, tag = ARGV[1], ARGV[2]
local mode, ttl = ARGV[3], tonumber(ARGV[4])
if mode == "own" then
  redis.call("SET", KEYS[3], ttl)
  if ttl > 0 then redis.call("EXPIRE", KEYS[3], ttl) end
else
  redis.call("DEL", KEYS[3])
end
if redis.call("EXISTS", KEYS[1]) == 1 then
  local G = jobspace(prefix, tag, new_job(KEYS[4], "ttl"))
  redis.call("HSET", G.state, "ttl", ttl)
  redis.call("SUNIONSTORE", G.part("todo"), KEYS[1])
  -- what leads to the thread from outside it lives at least as long as the keys the job
  -- extends, from this first step on (the job sets its exact expiry when it ends): the
  -- threads-by-value lists it is in (K.values), a cluster's bounds (K.bounds), which the
  -- lists' readers need to see the thread at all
  local K = keyspace(prefix, tag)
  for _, key in ipairs({ K.values, K.bounds }) do
    local left = redis.call("PTTL", key)
    if left ~= -2 then keep_alive(key, ttl, false, left) end
  end
end
return reap(prefix, tag, tonumber(ARGV[5]))
