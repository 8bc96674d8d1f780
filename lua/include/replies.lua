-- requires:
-- The words scripts reply with, as the clients compare them: the Python twin is
-- src/langgraph/checkpoint/rediskv/replies.py (tests/unit/test_replies.py: the same words, and no
-- script writes one as a literal).

-- A write found jobs of the thread pending (P:gc:{T}): nothing written, the client reaps first.
local REAPING = "REAPING"
-- A global index is not known to be complete (being built): the client lists another way.
local BUILDING = "BUILDING"
-- The first item of { INDEX, inc, S, score, ... } (cluster): lists that must hold the thread
-- before the write goes in (include/lists.lua).
local INDEX = "INDEX"
-- The first item of { NAMESPACES, ns, ... }: too many namespaces to merge in one call.
local NAMESPACES = "NAMESPACES"
-- The first word of the error "LOST <key> <what>": a key the thread needs was evicted.
local LOST = "LOST"
