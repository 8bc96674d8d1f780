"""The requests an operation yields, and the types of operations.

Every operation of the saver is a generator. It yields *requests* (:class:`ScriptCall`,
:class:`ScanKeys`, :class:`ScanPage`, :class:`Batch`), receives each reply through ``send()``,
and returns its result. A streaming operation (``list_checkpoints``) also yields
:class:`CheckpointTuple` items, meant for the caller. :mod:`..sync` and :mod:`..aio` drive
these generators over a sync or an asyncio redis-py client, standalone or cluster; nothing in
this package knows which (the sans-I/O style of h11).
"""

from __future__ import annotations

from collections.abc import Generator, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from langgraph.checkpoint.base import CheckpointTuple

T = TypeVar("T")
Arg = str | bytes | int

# SCAN's COUNT hint, unless a request names another (the saver's: Limits.scan_count)
SCAN_COUNT = 1000


@dataclass(frozen=True, slots=True)
class ScriptCall:
    """Run ``lua/<name>.lua``; the reply is the script's reply."""

    name: str
    keys: Sequence[str]
    args: Sequence[Arg]


@dataclass(frozen=True, slots=True)
class ScanKeys:
    """Every key matching ``match``, by SCAN (on a cluster: on every primary); the reply is
    the list of keys."""

    match: str
    count: int = SCAN_COUNT


@dataclass(frozen=True, slots=True)
class ScanPage:
    """One SCAN step over the keys matching ``match`` (on a cluster: the primaries one after
    the other), from ``cursor`` ("" for the first step); the reply is (the cursor of the next
    step, or None once done, the keys of this one). SCAN's promise holds: a key present
    throughout comes at least once (twice, rarely: when the keyspace shrinks meanwhile)."""

    match: str
    cursor: str = ""
    count: int = SCAN_COUNT


@dataclass(frozen=True, slots=True)
class Batch:
    """Script calls sent in one pipeline (not a transaction; on a cluster, one per node); the
    reply is their replies, in order."""

    calls: Sequence[ScriptCall]


@dataclass(frozen=True, slots=True)
class NodeBatch(Batch):
    """A Batch of read-only calls, one per thread, each reading the first key it declares,
    that a cluster may answer with one call of script ``name`` per node instead: ``args``,
    then the first key of each call whose slot that node serves (lua/thread_states.lua).
    A node whose call fails (a slot moved or moving, a map out of date, a restart) has its
    threads' calls sent as the Batch would send them, and so does a node asked for one
    thread only; a transport that knows no better sends the Batch. Reply: the calls'
    replies, in order, whichever way they went."""

    name: str = ""
    args: Sequence[Arg] = ()


Request = ScriptCall | ScanKeys | ScanPage | Batch
Op = Generator[Request, Any, T]
Stream = Generator[Request | CheckpointTuple, Any, None]
