"""The list_checkpoints script as the listings call it: one call, its pages, and a thread's
namespaces in chunks when it has more than one call merges."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

from langgraph.checkpoint.base import CheckpointTuple

from ..keys import encode_part
from . import calls, deadlines
from .limits import Limits
from .requests import Arg, Batch, Op, ScriptCall, Stream
from .state import CoreState

# one list stream: a thread, and its namespaces (encoded) when it has too many for one call
ListStream = tuple[str, Sequence[str] | None]


def namespace_streams(
    limits: Limits, thread_id: str, namespaces: Sequence[bytes]
) -> list[ListStream]:
    """A thread with more namespaces than one call merges, as one stream per chunk of them
    (in byte order, so that every call sees the same chunks)."""
    names = sorted(n.decode() for n in namespaces)
    return [
        (thread_id, names[i : i + limits.namespace_chunk])
        for i in range(0, len(names), limits.namespace_chunk)
    ] or [(thread_id, ())]


def page_size(limits: Limits, limit: int | None) -> int:
    """Checkpoints asked of one list call: a page, or what the limit leaves."""
    return limits.list_page if limit is None else min(limit, limits.list_page)


def list_call(
    core: CoreState,
    thread_id: str,
    ns: str | Sequence[str] | None,
    only_id: str,
    before: Arg,
    page: int,
    filter_args: Sequence[Arg],
    untraced: bool = False,
) -> ScriptCall:
    """list_checkpoints on one namespace (a str), on the encoded namespaces given (a
    sequence: a chunk of a thread with many), or on every namespace (None). ``untraced``: the
    reply is 0 when no key of the thread is left (the first page of a list() of one thread,
    see .deadlines)."""
    tag = core.keys.tag(thread_id)
    chunk: tuple[str, ...] = ()
    if ns is None:
        mode, named = "1", str(core.limits.namespace_chunk)
    elif isinstance(ns, str):
        mode, named = "0", encode_part(ns)
    else:
        mode, named, chunk = "2", "", tuple(ns)
    first_page = untraced and mode != "2"
    return calls.list_checkpoints(
        core.keys.thread(tag),
        prefix=core.keys.prefix,
        tag=tag,
        mode=mode + "u" if first_page else mode,
        namespace=named,
        only_id=only_id,
        before=before,
        page=page,
        scan_budget=core.limits.list_scan_budget,
        filters=filter_args,
        namespaces=chunk,
        registry=deadlines.registry_for_reads(core) if first_page else None,
    )


def pages(
    core: CoreState,
    call: Callable[[Arg, int], ScriptCall],
    tuples: Callable[[Sequence[Any]], Iterable[CheckpointTuple]],
    before: Arg,
    limit: int | None,
    first: Sequence[Any] | None = None,
) -> Stream:
    """One script call per page (``{cursor, ...}`` replies) until ``limit`` tuples are
    out or the cursor runs out; ``first`` is the reply to a first page already fetched."""
    remaining = limit
    while True:
        page = page_size(core.limits, remaining)
        reply = first if first is not None else (yield call(before, page))
        first = None
        for tup in tuples(reply):
            yield tup
            if remaining is not None:
                remaining -= 1
                if remaining == 0:
                    return
        if reply[0] is None:
            return
        before = reply[0]


def send_all(core: CoreState, calls: Sequence[ScriptCall]) -> Op[list[Any]]:
    """The calls' replies, in pipelines of core.limits.batch_size (a call alone goes alone: a
    pipeline would load the scripts first)."""
    if len(calls) == 1:
        return [(yield calls[0])]
    replies: list[Any] = []
    for start in range(0, len(calls), core.limits.batch_size):
        replies += yield Batch(calls[start : start + core.limits.batch_size])
    return replies
