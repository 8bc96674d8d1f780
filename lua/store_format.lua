#!lua flags=no-writes
--[[
  store_format: the stored format of the prefix, read once by each saver at its first call.

  KEYS[1]  P:fmt:{P:mk}     STRING the lowest release that reads what is stored under the
                            prefix ("0.3.0"); absent: 0.1.0's format, which every release
                            since reads (0.1.0 knows no P:fmt; a release that writes what
                            0.1.0 reads writes none either)

  ARGV     none

  Counts: KEYS 1; ARGV 0
  Built by: core/calls.py store_format()
  Reply: P:fmt, or false when there is none.

  no-writes: runs on a full server and on a replica too.
]]
-- requires:

return redis.call("GET", KEYS[1])
