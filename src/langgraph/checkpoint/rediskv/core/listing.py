"""list(None, ...): the checkpoints of every thread, newest first within each thread (no
limit) or over all of them (a limit), from an index when the filter has one."""

from __future__ import annotations

import heapq
from collections.abc import Callable, Sequence
from typing import Any

from ..keys import decode_part
from ..replies import BUILDING, NAMESPACES
from . import calls, discovery, paging
from .discovery import Candidates, Threads
from .indexes import register_metadata_index
from .merge import StreamMerge
from .paging import ListStream
from .requests import Arg, Op, ScriptCall, Stream
from .state import CoreState


class Ranked:
    """A checkpoint's place in the order of list(None, limit=...): the newest id first, then
    by thread id, then by namespace (encoded). ``a < b``: a comes after b, so that a heap's
    top is the last."""

    __slots__ = ("id", "ns", "thread")

    def __init__(self, checkpoint_id: bytes, thread: str, ns: bytes) -> None:
        self.id, self.thread, self.ns = checkpoint_id, thread, ns

    def key(self) -> tuple[bytes, str, bytes]:
        return (self.id, self.thread, self.ns)

    def __lt__(self, other: Ranked) -> bool:
        if self.id != other.id:
            return self.id < other.id
        return (self.thread, self.ns) > (other.thread, other.ns)


def list_indexed(
    core: CoreState,
    key: str,
    index: str,
    filter_args: Sequence[Arg],
    before: Arg,
    limit: int | None,
) -> Stream:
    """list(None) for a filter on an indexed key: newest first straight from the index,
    so the cost follows the matches, not the size of the store. An index that is not
    known to be complete (the key was added to a store that had checkpoints, and no
    reindex has finished) is not used: the threads are scanned instead."""
    yield from register_metadata_index(core)

    def call(before: Arg, page: int) -> ScriptCall:
        return calls.list_indexed(
            index,
            prefix=core.keys.prefix,
            before=before,
            page=page,
            scan_budget=core.limits.list_scan_budget,
            metadata_key=key,
            filters=filter_args,
        )

    first = yield call(before, paging.page_size(core.limits, limit))
    if first == BUILDING:
        yield from list_all_threads(core, filter_args, str(before), limit)
        return
    yield from paging.pages(
        core,
        call,
        lambda reply: (
            core.codec.decode_record(core.keys.thread_from_tag(tag.decode()), record)
            for tag, record in zip(reply[1::2], reply[2::2], strict=True)
        ),
        before,
        limit,
        first,
    )


def list_thread_candidates(
    core: CoreState,
    indexes: Sequence[str],
    filter_args: Sequence[Arg],
    before: str,
    limit: int | None,
) -> Stream:
    """list(None) for a filter with values in threads-by-value indexes: only the threads
    listed under every one of them are visited, newest first by their score, until the
    checkpoints at hand are newer than any thread left could hold (each thread is listed
    with the whole filter, so one that no longer matches costs a call, never a wrong
    answer). Indexes not known to be complete (a store written before them, no reindex
    since): every thread."""
    yield from register_metadata_index(core)
    # a cluster's lists live in different slots: one of them (the filter's first, the
    # run's if it has one), and the registry read on its own
    if core.cluster_lists:
        suffix = indexes[0][len(core.keys.threads_with("")) :]
        # (a run's list is visited whole: its threads are few, and K.bounds keeps the
        # newest scores of a thread's last runs only; lua/include/cluster_lists.lua)
        probe = None if suffix.startswith("/") else suffix
        candidates = Candidates(tuple(indexes[:1]), probe=probe)
    else:
        candidates = Candidates(tuple(indexes))
    if not (yield from discovery.read_candidates(core, candidates)):
        yield from list_all_threads(core, filter_args, before, limit)
        return
    if limit is None:
        yield from list_by_thread(
            core, discovery.candidate_threads(core, candidates), filter_args, before
        )
        return
    yield from StreamMerge(core, [], filter_args, before, limit, candidates).run()


def list_all_threads(
    core: CoreState, filter_args: Sequence[Arg], before_id: str, limit: int | None
) -> Stream:
    """list(None) over every thread, found by SCAN a step at a time: without a limit
    thread by thread (list_by_thread), with one the newest ``limit`` (list_newest).
    The client's memory follows neither the number of threads nor their histories."""
    if limit is None:
        yield from list_by_thread(core, discovery.scanned_threads(core), filter_args, before_id)
    else:
        yield from list_newest(
            core, lambda: discovery.scanned_threads(core), filter_args, before_id, limit
        )


def list_by_thread(
    core: CoreState, next_threads: Threads, filter_args: Sequence[Arg], before_id: str
) -> Stream:
    """list(None) without a limit: thread by thread, as ``next_threads`` gives them, each
    thread's checkpoints newest first (its namespaces merged, as list() of one thread
    does). The first pages of core.limits.thread_group threads are read in one round trip (at most
    core.limits.first_page checkpoints each), a thread's further pages one at a time: the client
    holds those and the chunk of thread ids, nothing per thread of the store."""
    while True:
        threads = yield from next_threads()
        if threads is None:
            return
        for start in range(0, len(threads), core.limits.thread_group):
            group = threads[start : start + core.limits.thread_group]
            calls = [
                paging.list_call(core, t, None, "", before_id, core.limits.first_page, filter_args)
                for t in group
            ]
            replies = yield from paging.send_all(core, calls)
            for n, thread_id in enumerate(group):
                first, replies[n] = replies[n], None  # (out: not held any more)
                yield from thread_pages(core, thread_id, first, filter_args, before_id)


def thread_pages(
    core: CoreState,
    thread_id: str,
    first: Sequence[Any],
    filter_args: Sequence[Arg],
    before_id: str,
) -> Stream:
    """A thread's checkpoints (every namespace), newest first, from its first reply on."""
    if first and first[0] == NAMESPACES:  # too many to merge in one call
        streams = paging.namespace_streams(core.limits, thread_id, first[1:])
        yield from StreamMerge(core, streams, filter_args, before_id, None).run()
        return

    def call(before: Arg, page: int) -> ScriptCall:
        return paging.list_call(core, thread_id, None, "", before, page, filter_args)

    yield from paging.pages(
        core,
        call,
        lambda reply: (core.codec.decode_record(thread_id, record) for record in reply[1:]),
        before_id,
        None,
        first,
    )


def list_newest(
    core: CoreState,
    threads: Callable[[], Threads],
    filter_args: Sequence[Arg],
    before_id: str,
    limit: int,
) -> Stream:
    """list(None, limit=L) over threads that come in no order of time (SCAN): the L
    newest checkpoints, newest first, in memory of O(L). The ids are chosen first
    (select_newest), then their records read a page at a time. A checkpoint gone in
    between (deleted, expired, its blobs gone) is made up for by choosing again among
    those after the last one chosen."""
    cut: Ranked | None = None
    remaining = limit
    while remaining > 0:
        chosen = yield from select_newest(core, threads(), filter_args, before_id, remaining, cut)
        chosen.sort(reverse=True)  # (the newest first)
        asked, missing = remaining, 0
        for start in range(0, len(chosen), core.limits.list_page):
            part = chosen[start : start + core.limits.list_page]
            calls = [
                paging.list_call(
                    core, e.thread, decode_part(e.ns.decode()), e.id.decode(), "", 1, filter_args
                )
                for e in part
            ]
            replies = yield from paging.send_all(core, calls)
            for n, entry in enumerate(part):
                reply, replies[n] = replies[n], None
                if len(reply) > 1:
                    yield core.codec.decode_record(entry.thread, reply[1])
                    remaining -= 1
                else:
                    missing += 1
        if not missing or len(chosen) < asked:
            return
        cut = chosen[-1]


def select_newest(
    core: CoreState,
    next_threads: Threads,
    filter_args: Sequence[Arg],
    before_id: str,
    limit: int,
    cut: Ranked | None,
) -> Op[list[Ranked]]:
    """The newest ``limit`` checkpoints of the threads (only those after ``cut``, when
    given), as ids: each thread's ids, newest first (ids only), go through a heap of the
    newest ``limit`` seen so far, and a thread's next page is asked only while its ids
    may still enter it. Memory: the heap, and the ids of one round trip."""
    best: list[Ranked] = []  # a heap: the last of the newest on top
    held: set[tuple[bytes, str, bytes]] = set()  # (a thread SCAN yields twice: once)
    before: Arg = before_id
    if cut is not None:
        bound = cut.id + b"\0"  # (ids up to the cut's: of equal ids, the later threads)
        if not before_id or bound < before_id.encode():
            before = bound

    def offer(entry: Ranked) -> None:
        if (cut is not None and not entry < cut) or entry.key() in held:
            return
        if len(best) < limit:
            heapq.heappush(best, entry)
        elif best[0] < entry:
            held.discard(heapq.heapreplace(best, entry).key())
        else:
            return
        held.add(entry.key())

    size = paging.page_size(core.limits, limit)
    group = max(1, core.limits.select_ids // size)
    while True:
        threads = yield from next_threads()
        if threads is None:
            return best
        for start in range(0, len(threads), group):
            streams: list[ListStream] = [(t, None) for t in threads[start : start + group]]
            cursors: list[Arg] = [before] * len(streams)
            waiting = list(range(len(streams)))
            first = True
            while waiting:
                page = min(size, core.limits.first_ids) if first else size
                first = False
                calls = [
                    paging.list_call(core, *streams[i], "", cursors[i], -page, filter_args)
                    for i in waiting
                ]
                replies = yield from paging.send_all(core, calls)
                again: list[int] = []
                for i, reply in zip(waiting, replies, strict=True):
                    if reply and reply[0] == NAMESPACES:
                        for chunk in paging.namespace_streams(
                            core.limits, streams[i][0], reply[1:]
                        ):
                            again.append(len(streams))
                            streams.append(chunk)
                            cursors.append(cursors[i])
                        continue
                    for ns, checkpoint_id in reply[1:]:
                        offer(Ranked(checkpoint_id, streams[i][0], ns))
                    if reply[0] is not None and (len(best) < limit or reply[0] > best[0].id):
                        cursors[i] = reply[0]
                        again.append(i)
                waiting = again
