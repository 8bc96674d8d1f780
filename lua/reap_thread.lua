#!lua flags=allow-oom
--[[
  reap_thread: one bounded step of the jobs a delete, prune, delete_for_runs, set_thread_ttl
  or unpublished copy of the thread left pending (see include/jobs.lua). Writers of the thread
  reply "REAPING" while jobs are pending; the client then calls this until it replies 0.

  KEYS[1]  P:gc:{T}         the thread's gc root (SET of pending jobs)

  ARGV[1]  prefix P   ARGV[2]  hash tag {T}
  ARGV[3]  budget: stop after about this much work (one unit ~ one Redis command)
  ARGV[4]  (optional) a job, "copy:<n>": reap it alone, while it is the oldest pending job and
  ARGV[5]  holds this token (a copy_thread discarding its own job after a failure; a job of
           that number with another token is another copy's)

  Counts: KEYS 1; ARGV 3..5
  Built by: core/calls.py reap_thread()
  Reply: the number of jobs still pending: 0 when nothing is left to reap
]]
-- requires: reap

return reap(ARGV[1], ARGV[2], tonumber(ARGV[3]) or 2000, ARGV[4], ARGV[5])
