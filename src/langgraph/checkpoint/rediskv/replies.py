"""The words the Lua scripts reply with, as bytes, as the transports receive and compare them.
The Lua twin is ``lua/include/replies.lua`` (tests/unit/test_replies.py checks that both define the
same words, and that no script writes one as a literal)."""

from __future__ import annotations

# A write found jobs of the thread pending: nothing written, the client reaps first.
REAPING = b"REAPING"
# A global index is not known to be complete (being built): the client lists another way.
BUILDING = b"BUILDING"
# The first item of [INDEX, inc, S, score, ...] (cluster): lists that must hold the thread
# before the write goes in.
INDEX = b"INDEX"
# The first item of [NAMESPACES, ns, ...]: too many namespaces to merge in one call.
NAMESPACES = b"NAMESPACES"
# The first word of the error "LOST <key> <what>": a key the thread needs was evicted.
LOST = b"LOST"

# Every reply word, by name.
REPLY_WORDS: dict[str, bytes] = {
    "REAPING": REAPING,
    "BUILDING": BUILDING,
    "INDEX": INDEX,
    "NAMESPACES": NAMESPACES,
    "LOST": LOST,
}
