"""What the transports (:mod:`.sync`, :mod:`.aio`) share beside the logic: how a cluster
sends a NodeBatch and walks a SCAN over its primaries, the size check of a request before it
is sent, and the translation of a server's error replies into the saver's errors."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from redis.exceptions import NoScriptError, OutOfMemoryError, RedisError, ResponseError

from .core.requests import Batch, NodeBatch, Request, ScriptCall
from .errors import (
    CheckpointLostError,
    ListingInterruptedError,
    ServerFullError,
    ThreadLostError,
    ValueTooLargeError,
)
from .keys import KeySchema, tag_of
from .replies import LOST


def explain_response_error(request: Request, exc: Exception) -> Exception:
    """A clearer error for a server reply that the caller's input caused, else ``exc``."""
    if isinstance(exc, OutOfMemoryError) or str(exc).startswith("OOM"):
        calls = request.calls if isinstance(request, Batch) else [request]
        names = sorted({c.name for c in calls if isinstance(c, ScriptCall)})
        return ServerFullError(
            f"the Redis server is over its maxmemory and refused {', '.join(names)}; nothing "
            "was written. Free memory (delete or prune threads, use a ttl) or raise maxmemory "
            f"({exc})"
        )
    lost = LOST.decode() + " "
    if str(exc).startswith(lost):  # a read found a key of a thread evicted (records.lua)
        key, what = str(exc)[len(lost) :].split(" ", 1)
        thread_id = KeySchema.thread_from_tag(tag_of(key) or "{}")
        if what.startswith("thread due "):  # every key, while the registry holds it as due
            return ThreadLostError(thread_id, key, int(what[len("thread due ") :]))
        return CheckpointLostError(thread_id, what, key)
    if "near '#'" in str(exc):
        return ResponseError(
            "the server cannot run this saver's scripts: they use Redis 7 script flags, so "
            f"the saver needs Redis 7.0 or later, or Valkey 7.2 or later ({exc})"
        )
    if "bulk length" not in str(exc):
        return exc
    return ValueTooLargeError(
        f"a serialized value of {largest_arg(request)} bytes is larger than the server "
        f"accepts (its proto-max-bulk-len); nothing was written ({exc})"
    )


def node_groups(
    request: NodeBatch, node_of: Callable[[str], Any]
) -> tuple[list[Any], list[tuple[Any, list[int]]], list[int]]:
    """How a cluster transport sends a NodeBatch: the list of its replies to fill in, its
    calls grouped by the node that ``node_of`` (the client's slot map) says serves their
    first key, for the nodes with two or more, and the calls to send as a Batch (one alone
    on its node)."""
    groups: dict[str, tuple[Any, list[int]]] = {}
    for i, call in enumerate(request.calls):
        node = node_of(call.keys[0])
        groups.setdefault(node.name, (node, []))[1].append(i)
    together = [(node, indexes) for node, indexes in groups.values() if len(indexes) > 1]
    alone = [i for _, indexes in groups.values() if len(indexes) == 1 for i in indexes]
    return [None] * len(request.calls), together, alone


def take_node_replies(
    groups: Sequence[tuple[Any, list[int]]], results: Sequence[Any], out: list[Any]
) -> tuple[list[int], bool]:
    """Fill ``out`` with the replies of a NodeBatch's calls by node (``results``: each node's
    reply, or the RedisError its call raised); the calls of the nodes that failed, to send
    as a Batch, and whether one of them had lost its scripts (NOSCRIPT: load them again)."""
    failed: list[int] = []
    lost = False
    for (_, indexes), replies in zip(groups, results, strict=True):
        if isinstance(replies, RedisError):
            lost = lost or isinstance(replies, NoScriptError)
            failed += indexes
            continue
        for i, reply in zip(indexes, replies, strict=True):
            out[i] = reply
    return failed, lost


def scan_position(cursor: str) -> tuple[int, int]:
    """A ScanPage cursor as (which primary, in name order; its SCAN cursor)."""
    at, _, rest = cursor.partition(":")
    scan = rest.partition(":")[0]
    return (int(at), int(scan)) if scan else (0, 0)


def next_scan_position(at: int, scan: int, nodes: int, layout: str = "") -> str | None:
    """The ScanPage cursor after a SCAN step of primary ``at`` replied ``scan``; on a cluster
    it carries the digest of the layout the listing began with (``layout``)."""
    suffix = f":{layout}" if layout else ""
    if scan:
        return f"{at}:{scan}{suffix}"
    return f"{at + 1}:0{suffix}" if at + 1 < nodes else None


def check_cluster_layout(cursor: str, replies: Iterable[bytes | str]) -> str:
    """The digest of which primary serves which slots, from each primary's CLUSTER NODES
    reply (its own line), for the ScanPage cursor. A listing of every thread walks the
    primaries one after another, a SCAN step at a time, while its caller consumes it: a
    slot moved meanwhile from a primary walked to one not walked yet would give its threads
    twice, and one moved the other way would lose them. So a step refuses to go on when the
    layout differs from the one in ``cursor`` (where the listing began), or when a slot is
    being moved (a migrating or importing mark), with ListingInterruptedError."""
    own: list[str] = []
    moving = False
    for reply in replies:
        text = reply.decode() if isinstance(reply, bytes) else str(reply)
        for line in text.splitlines():
            fields = line.split()
            if len(fields) >= 8 and "myself" in fields[2].split(","):
                marks = [s for s in fields[8:] if s.startswith("[")]
                moving = moving or bool(marks)
                slots = ",".join(s for s in fields[8:] if not s.startswith("["))
                own.append(f"{fields[0]}={slots}")
    layout = hashlib.sha1("|".join(sorted(own)).encode()).hexdigest()[:16]
    began = cursor.split(":")[2] if cursor.count(":") >= 2 else layout
    if moving or layout != began:
        raise ListingInterruptedError(
            "list(None) on a Redis Cluster: slots moved, or were being moved, while the "
            "listing walked the primaries one after another, so it could miss threads or give "
            "some twice. Nothing stored is affected: list again once the move is done."
        )
    return layout


def largest_arg(request: Request) -> int:
    """The length of the longest argument a request sends."""
    calls = request.calls if isinstance(request, Batch) else [request]
    # (on every call: list comprehensions cost half a generator's time here)
    return max(
        [
            max([len(a) for a in call.args if not isinstance(a, int)], default=0)
            for call in calls
            if isinstance(call, ScriptCall)
        ],
        default=0,
    )


def refuse_oversized(request: Request, limit: int) -> None:
    """Raise ValueTooLargeError, before anything is sent, for a request with an argument
    longer than the server's proto-max-bulk-len: the server would drop the connection, and
    with it every other call in flight on it."""
    largest = largest_arg(request)
    if largest > limit:
        raise ValueTooLargeError(
            f"a serialized value of {largest} bytes is larger than the server accepts (its "
            f"proto-max-bulk-len is {limit}); nothing was written"
        )
