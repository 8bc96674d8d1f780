"""Which threads a listing or a whole-thread job visits: every thread by SCAN, or only the
candidates that the threads-by-value indexes (P:tm) and run_id's metadata index list."""

from __future__ import annotations

import dataclasses
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ..keys import THREADS_BY_VALUE, metadata_index_suffix
from ..replies import BUILDING
from . import calls, cluster_lists
from .requests import Arg, Batch, Op, ScanKeys, ScanPage
from .state import CoreState

# where a listing over many threads takes them from: the next chunk of thread ids, or None
Threads = Callable[[], Op[list[str] | None]]


@dataclass
class Candidates:
    """Where a list over threads-by-value indexes stands: the next scores to read and the
    threads read but not visited yet, newest first, with their scores and list members."""

    indexes: tuple[str, ...]
    max_score: bytes = b"inf"  # where the next chunk starts ("(<score>": below it)
    driver: int = 0  # the index whose order the chunks follow (0: not chosen yet)
    done: bool = False
    queue: deque[tuple[str, float, bytes]] = dataclasses.field(default_factory=deque)
    # on a cluster: the list (its suffix) whose threads are asked their newest score before
    # they are visited, and the threads asked, by that score (a heap of (-score, thread id))
    probe: str | None = None
    probed: list[tuple[float, str]] = dataclasses.field(default_factory=list)
    live: set[str] = dataclasses.field(default_factory=set)
    seen: set[bytes] = dataclasses.field(default_factory=set)


def read_candidates(core: CoreState, candidates: Candidates) -> Op[bool]:
    """The next chunk of candidate threads into ``candidates.queue``; False when the
    indexes are still being built."""
    if core.cluster_lists and not candidates.driver and not (yield from lists_ready(core)):
        reply: Any = BUILDING
    else:
        reply = yield calls.list_thread_candidates(
            candidates.indexes,
            prefix=core.keys.prefix,
            max_score=candidates.max_score,
            chunk=core.limits.candidate_chunk,
            driver=candidates.driver,
            cluster="cluster" if core.cluster_lists else "",
        )
    if reply == BUILDING:  # (only ever the first reply: an index once ready stays so)
        candidates.done = True
        return False
    candidates.driver = int(reply[0])
    last = reply[1]
    candidates.done = last is None
    if last is not None:  # the next chunk starts below this score
        candidates.max_score = b"(" + last
    for member, score in zip(reply[2::2], reply[3::2], strict=True):
        tag = cluster_lists.tag_of_member(member)  # (a cluster's members: "{T}<incarnation>")
        # once per thread (one deleted and written again meanwhile); on a cluster once per
        # incarnation: the probe tells the live one (cluster_lists.probe)
        seen = member if core.cluster_lists else tag
        if seen not in candidates.seen:
            candidates.seen.add(seen)
            thread_id = core.keys.thread_from_tag(tag.decode())
            candidates.queue.append((thread_id, float(score), member))
    return True


def lists_ready(core: CoreState) -> Op[bool]:
    """Whether a cluster's threads-by-value lists hold every thread (see
    register_metadata_index); once they are, they stay so, and the saver asks again only
    core.limits.ready_known_for seconds later."""
    known = core.lists_known_ready
    if known and time.monotonic() - known[0] < core.limits.ready_known_for:
        return True
    state = yield calls.register_metadata_index(
        core.keys.metadata_keys(), mode="state", metadata_keys=(THREADS_BY_VALUE,)
    )
    core.lists_known_ready[:] = [time.monotonic()] if state[0] == b"ready" else []
    return bool(state[0] == b"ready")


def scanned_threads(core: CoreState) -> Threads:
    """Every thread, a SCAN step's worth at a time, in the order SCAN yields them (a
    thread once within a step; SCAN may yield one twice, rarely, see ScanPage)."""
    cursor: str | None = ""

    def next_threads() -> Op[list[str] | None]:
        nonlocal cursor
        while cursor is not None:
            cursor, keys = yield ScanPage(
                core.keys.thread_pattern(), cursor, core.limits.scan_count
            )
            threads = list(dict.fromkeys(core.keys.thread_id_of(k.decode()) for k in keys))
            if threads:
                return threads
        return None

    return next_threads


def candidate_threads(core: CoreState, candidates: Candidates) -> Threads:
    """The candidate threads, a chunk at a time, newest first by their scores; on a
    cluster, of a value's list, those whose incarnation is live and that have a
    checkpoint with the value (cluster_lists.probe). Only a chunk's threads are remembered: a
    thread deleted and written again while the listing runs may come twice."""

    def next_threads() -> Op[list[str] | None]:
        while True:
            if not candidates.queue:
                if candidates.done:
                    return None
                candidates.seen.clear()
                yield from read_candidates(core, candidates)
                continue
            asked = list(candidates.queue)
            candidates.queue.clear()
            if candidates.probe is None:
                threads = [thread_id for thread_id, _, _ in asked]
            else:
                threads = []
                for start in range(0, len(asked), core.limits.batch_size):
                    part = asked[start : start + core.limits.batch_size]
                    live = yield from cluster_lists.probe(core, candidates.probe, part)
                    threads += [thread_id for thread_id, _ in live]
            # (on a cluster, a thread of a run's list under two incarnations: once)
            threads = list(dict.fromkeys(threads))
            if threads:
                return threads

    return next_threads


def threads_of_runs(core: CoreState, run_ids: Sequence[str]) -> Op[list[str]]:
    """On a cluster: the threads in the lists of the runs (a superset of those with a
    checkpoint of one of them; see cluster_lists)."""
    found: set[str] = set()
    for run_id in run_ids:
        candidates = Candidates((core.keys.threads_with(cluster_lists.run_suffix(run_id)),))
        candidates.driver = 1  # (one list; the registry was read)
        while not candidates.done:
            yield from read_candidates(core, candidates)
            found.update(thread_id for thread_id, _, _ in candidates.queue)
            candidates.queue.clear()
    return sorted(found)


def threads_in_run_index(core: CoreState, run_ids: Sequence[str]) -> Op[list[str] | None]:
    """On a standalone server: the threads in run_id's metadata index under the runs, and
    those whose runs it does not name by their text (P:rx: a run_id that is not a
    string, or a long one), a superset of those with a checkpoint of one of the runs;
    None when that index is not complete (see lua/run_threads.lua)."""
    found: set[str] = set()
    # (index, where to read it on): the runs' first pages go in pipelines, not one round
    # trip each (20,000 runs took 6 s)
    pending: list[tuple[str, Arg]] = [
        (core.keys.metadata_index(metadata_index_suffix("run_id", core.codec.canonical(r))), "")
        for r in run_ids
    ]
    while pending:
        reading, pending = pending[: core.limits.batch_size], pending[core.limits.batch_size :]
        replies = yield Batch(
            [
                calls.run_threads(
                    index,
                    core.keys.unindexed_runs(),
                    prefix=core.keys.prefix,
                    after=after,
                    count=core.limits.candidate_chunk,
                )
                for index, after in reading
            ]
        )
        for (index, _), reply in zip(reading, replies, strict=True):
            if reply == BUILDING:
                return None
            found.update(core.keys.thread_from_tag(tag.decode()) for tag in reply[1:])
            if reply[0] is not None:
                pending.append((index, reply[0]))
    return sorted(found)


def scan_thread_ids(core: CoreState) -> Op[list[str]]:
    keys = yield ScanKeys(core.keys.thread_pattern())
    return sorted({core.keys.thread_id_of(k.decode()) for k in keys})
