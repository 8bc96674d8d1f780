"""The Python half of the rules the scripts share (their Lua half: lua/include/keyschema.lua):
which metadata values get an index and under which suffix, a checkpoint id's score, which
channel values live inside their record, and the configs a checkpoint is named by.
"""

from __future__ import annotations

import functools
import re
from typing import Any

from langchain_core.runnables import RunnableConfig

from ..keys import metadata_index_suffix

# The metadata keys indexed by default, and the longest canonical value that gets an entry
# (longer values, and None, are still filtered, by the scan).
# run_id: what delete_for_runs and LangGraph's run lookups search by. "source" and "step"
# are not indexed by default: a few values each, so an index on them hardly narrows a search,
# and each indexed key costs a sorted-set entry per checkpoint (memory) and its upkeep (CPU).
DEFAULT_INDEXED_METADATA = ("run_id",)
MAX_INDEXED_VALUE = 256
# Metadata keys with few distinct values: another indexed filter key is a better start.
UNSELECTIVE = frozenset({"source", "step"})
# Threads-by-value indexes (P:tm, standalone servers): every thread that has a checkpoint with
# a metadata value that thread_indexed() takes is listed under it, so that list(None, filter)
# on any key visits only the threads that may match, newest first, with no option to set.
# Keys left out: run_id (indexed per checkpoint by default) and LangGraph's step (a number
# anyway). The same rule: thread_indexed() in lua/include/keyschema.lua.
THREAD_INDEX_SKIPS = frozenset({"step", "run_id"})
MAX_THREAD_INDEXED = 130  # canonical JSON: a string of up to 128 characters
# LangGraph's trigger channels ("branch:to:<node>", written with None every time a node is
# triggered) are stored inside the checkpoint record instead of as blob keys: a blob key costs
# about 180 bytes of Redis memory and a ref in `bv`, the value a byte in the record. Only
# these, and only None: any other channel may be a DeltaChannel, or become one, whose stored
# values get_delta_channel_history finds as seeds through `bv` (lua/include/delta.lua). A
# trigger channel is not (a state key of that name would collide with LangGraph's own).
TRIGGER_CHANNEL_PREFIX = "branch:to:"


def thread_id_of(config: RunnableConfig | None) -> str:
    configurable = (config or {}).get("configurable") or {}
    thread_id = configurable.get("thread_id")
    if thread_id is None:
        raise ValueError(
            'config has no "thread_id": pass config={"configurable": {"thread_id": ...}} '
            "(the thread_id names the conversation whose checkpoints are read or written)"
        )
    return str(thread_id)


def config_of(thread_id: str, ns: str, checkpoint_id: str) -> RunnableConfig:
    return {
        "configurable": {
            "thread_id": thread_id,
            "checkpoint_ns": ns,
            "checkpoint_id": checkpoint_id,
        }
    }


def inlinable(channel: str, value: Any) -> bool:
    """Whether a channel value is stored inside its checkpoint's record (see
    TRIGGER_CHANNEL_PREFIX)."""
    return value is None and channel.startswith(TRIGGER_CHANNEL_PREFIX)


def index_suffix(key: str, canonical: str) -> str:
    """The suffix of the global indexes a metadata value may get (put_checkpoint.lua encodes
    none itself), "" for a value that gets none: null, or longer than MAX_INDEXED_VALUE.
    ``key``: the text of the metadata key, as the record's field names it."""
    if not indexable(canonical):
        return ""  # (before the cache: it holds no long value)
    return _cached_index_suffix(key, canonical)


@functools.lru_cache(maxsize=4096)
def _cached_index_suffix(key: str, canonical: str) -> str:
    # most values repeat from one put to the next (source, user ids, a run's id); the key is
    # a plain str here (a str Enum equal to it would share its entry: see index_suffix)
    return metadata_index_suffix(key, canonical)


def indexable(canonical: str) -> bool:
    return canonical != "null" and len(canonical) <= MAX_INDEXED_VALUE


def thread_indexed(key: str, canonical: str) -> bool:
    """Whether a metadata value puts its thread in a threads-by-value index: a JSON string of
    at most 128 characters, for a key not in THREAD_INDEX_SKIPS. (Numbers are left out: most
    are counters, which would take an entry per checkpoint.)"""
    return (
        key not in THREAD_INDEX_SKIPS
        and canonical.startswith('"')
        and len(canonical.encode()) <= MAX_THREAD_INDEXED
    )


_UUID_HEAD = re.compile(rb"([0-9a-f]+)-([0-9a-f]+)-([0-9a-f])")


def id_score(checkpoint_id: bytes) -> float:
    """A checkpoint id's score in the threads-by-value indexes: for an id that starts like a
    lowercase UUID, its first 13 hex digits as a number (exact in a float), so that for two
    such ids lexical order implies the order of their scores; for any other id, infinity.
    The same rule: id_score() in lua/include/keyschema.lua."""
    head = _UUID_HEAD.match(checkpoint_id)
    if head and len(head[1]) == 8 and len(head[2]) == 4:
        return float(int(head[1] + head[2] + head[3], 16))
    return float("inf")


def newer_than(checkpoint_id: bytes, score: float) -> bool:
    """Whether the checkpoint is newer than every checkpoint whose score is at most
    ``score``: an id with a score above it (ids of other forms score infinity)."""
    own = id_score(checkpoint_id)
    return own != float("inf") and own > score
