#!lua flags=no-writes
--[[
  get_kept_checkpoint: one checkpoint by id, also when keep_last hid it (field "h",
  include/trim.lua: kept only because newer checkpoints rebuild their delta channels from it,
  hidden from get_tuple and list). The migration reads these ancestors, so that a copy
  rebuilds the delta channels as the source does. Reads only: no expiry is renewed.

  KEYS[1]  P:idx:{T}:N      namespace index (ZSET of checkpoint ids)

  ARGV[1]  prefix P   ARGV[2]  hash tag {T}   ARGV[3]  namespace N (encoded)
  ARGV[4]  checkpoint id (raw)

  Counts: KEYS 1; ARGV 4
  Built by: core/calls.py get_kept_checkpoint()
  Reply: nil when there is no such checkpoint (not in the index, incomplete, or its thread's
  root P:th:{T} is gone), else the checkpoint as get_tuple.lua replies it.
]]
-- requires: keyschema, records

local K = keyspace(ARGV[1], ARGV[2])
if redis.call("EXISTS", K.thread) == 0 then return nil end
if not redis.call("ZSCORE", KEYS[1], ARGV[4]) then return nil end
return load_checkpoint(K, ARGV[3], ARGV[4], 0, nil, true)
