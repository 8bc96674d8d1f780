#!lua flags=allow-oom
--[[
  leave_thread_list: on a cluster, remove entries of thread incarnations that are gone from a
  threads-by-value list (include/lists.lua): an incarnation never comes back, so no writer can
  need them.

  KEYS[1]  P:tm:S           the list
  ARGV[1..]  members "{T}<inc>"

  Reply: the number removed.
]]

return redis.call("ZREM", KEYS[1], unpack(ARGV))
