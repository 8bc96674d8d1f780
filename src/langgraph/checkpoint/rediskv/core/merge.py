"""Several list streams merged newest first: a thread's namespaces in chunks, or, for
list(None, filter, limit), the candidate threads of the threads-by-value indexes."""

from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Sequence
from typing import Any

from ..replies import NAMESPACES
from . import cluster_lists, discovery, paging
from .discovery import Candidates
from .paging import ListStream
from .requests import Arg, Batch, Op, Stream
from .rules import newer_than
from .state import CoreState


class Newest:
    """Heap key that pops the lexically greatest checkpoint id (the newest) first."""

    __slots__ = ("id",)

    def __init__(self, checkpoint_id: bytes) -> None:
        self.id = checkpoint_id

    def __lt__(self, other: Newest) -> bool:
        return self.id > other.id

    def __eq__(self, other: object) -> bool:
        # (so that a heap entry's next fields order equal ids)
        return isinstance(other, Newest) and self.id == other.id

    __hash__ = None  # type: ignore[assignment]


class StreamMerge:
    """Pages of several streams (a thread's every namespace, or a chunk of the namespaces of
    a thread that has too many for one call) merged newest first. A stream whose reply lists
    its namespaces instead is replaced by one stream per chunk of them. ``candidates``:
    threads to add as streams while the newest checkpoint at hand is not newer than the next
    one's score (see listing.list_thread_candidates).

    With more than limits.list_window streams, a stream's first fetch reads only the id of
    its next checkpoint (a head, ``[ns, id]``), its page is read when that head comes out on
    top, and a stream whose page is not needed soon goes back to its head: at most
    list_window pages are held at a time.

    :meth:`run` is the operation; the other methods are its steps, over the state below."""

    def __init__(
        self,
        core: CoreState,
        streams: list[ListStream],
        filter_args: Sequence[Arg],
        before_id: str,
        limit: int | None,
        candidates: Candidates | None = None,
    ) -> None:
        self.core, self.limits = core, core.limits
        self.streams = streams
        self.filter_args, self.before_id, self.limit = filter_args, before_id, limit
        self.candidates = candidates
        self.page = paging.page_size(self.limits, limit)
        # heap entries: (Newest(id), whether a head, stream index, position in that stream's
        # page, version): of equal ids whole records come out first, so that reading a
        # head's page never puts back at the top a stream that has just been read; an entry
        # whose version is not its stream's is stale (the stream went back to its head)
        self.pages: list[list[Any]] = [[] for _ in streams]
        self.cursors: list[str | None] = [before_id] * len(streams)
        self.heap: list[tuple[Newest, bool, int, int, int]] = []
        self.versions: dict[int, int] = {}
        self.at: dict[int, int] = {}  # the streams holding a page, and their position in it

    def run(self) -> Stream:
        """The merged checkpoints, newest first, up to ``limit``."""
        heap, pages, window = self.heap, self.pages, self.limits.list_window
        yield from self.fetch(range(len(self.streams)), heads=len(self.streams) > window)
        self.make_room(())  # (a thread may have expanded into more streams than that)
        emitted = 0
        while True:
            if self.candidates is not None:
                yield from self.visit_candidates(self.candidates)
            if not heap:
                return
            _, head, i, pos, version = heapq.heappop(heap)
            if version != self.versions[i]:
                continue
            if head:
                # read the page from it on, with those of the heads right after it
                group = [i]
                while heap and len(group) < min(self.limits.head_group, window):
                    _, next_head, j, _, next_version = heap[0]
                    if next_version == self.versions[j] and not next_head:
                        break
                    heapq.heappop(heap)
                    if next_version == self.versions[j]:
                        group.append(j)
                for j in group:
                    self.cursors[j] = pages[j][-1][1].decode() + "\0"
                    pages[j] = []
                yield from self.fetch(group)
                self.make_room(group)
                continue
            record, pages[i][pos] = pages[i][pos], None  # (out: not held any more)
            yield self.core.codec.decode_record(self.streams[i][0], record)
            emitted += 1
            if self.limit is not None and emitted >= self.limit:
                return
            if pos + 1 < len(pages[i]):
                self.enter(i, pos + 1)
            elif self.cursors[i] is not None:
                pages[i] = []
                yield from self.fetch([i])
                self.make_room((i,))
            else:
                self.at.pop(i, None)  # (done)

    def enter(self, i: int, pos: int) -> None:
        """Stream i into the heap at position pos of its page."""
        self.versions[i] = self.versions.get(i, 0) + 1
        entry = self.pages[i][pos]
        head = len(entry) == 2
        heapq.heappush(self.heap, (Newest(entry[1]), head, i, pos, self.versions[i]))
        if not head:
            self.at[i] = pos

    def take(self, i: int, reply: Sequence[Any]) -> list[int]:
        """Take a reply; returns the new streams it expanded into, if any."""
        if reply and reply[0] == NAMESPACES:
            thread_id = self.streams[i][0]
            expanded = paging.namespace_streams(self.limits, thread_id, reply[1:])
            self.streams[i] = expanded[0]
            added = list(range(len(self.streams), len(self.streams) + len(expanded) - 1))
            self.streams.extend(expanded[1:])
            self.pages.extend([] for _ in added)
            self.cursors.extend(self.cursors[i] for _ in added)
            return [i, *added]
        self.pages[i] = list(reply[1:])
        self.cursors[i] = reply[0].decode() if reply[0] is not None else None
        self.at.pop(i, None)  # (its old page's place; enter() gives the new one)
        if self.pages[i]:
            self.enter(i, 0)
        return []

    def fetch(self, indexes: Sequence[int], heads: bool = False) -> Op[None]:
        """The next page of each stream, fetched until it holds a checkpoint or the stream
        is done: a page may come back empty with a cursor (a long stretch that the filter
        rejects), and the merge can only go on once every stream's next checkpoint is
        known."""
        batch_size = self.limits.batch_size
        waiting = list(indexes)
        while waiting:
            again: list[int] = []
            for start in range(0, len(waiting), batch_size):
                chunk = waiting[start : start + batch_size]
                size = -1 if heads else self.page
                calls = [
                    paging.list_call(
                        self.core,
                        self.streams[i][0],
                        self.streams[i][1],
                        "",
                        self.cursors[i] or "",
                        size,
                        self.filter_args,
                    )
                    for i in chunk
                ]
                # one call goes alone: a pipeline would load the scripts first
                replies = [(yield calls[0])] if len(calls) == 1 else (yield Batch(calls))
                for i, reply in zip(chunk, replies, strict=True):
                    again += self.take(i, reply)
            # a stream that expanded into chunks is in `again` and may be empty with a cursor
            # too: fetched twice, its checkpoints would come out twice
            waiting = list(
                dict.fromkeys(
                    [
                        *again,
                        *(i for i in waiting if not self.pages[i] and self.cursors[i] is not None),
                    ]
                )
            )

    def visit_candidates(self, more: Candidates) -> Op[None]:
        """Add candidate threads, a group at a time, until the newest checkpoint at hand is
        newer than any checkpoint of the threads left."""
        limits, limit, heap = self.limits, self.limit, self.heap
        group = (
            limits.batch_size
            if limit is None
            else max(limits.candidate_group, min(limit, limits.batch_size))
        )
        while True:
            if not more.queue and not more.done:
                yield from discovery.read_candidates(self.core, more)
            unique: dict[str, tuple[str, float, bytes]] = {}
            if more.probe is not None and more.done and not more.probed:
                for entry in more.queue:  # (in score order)
                    if entry[0] not in more.live:  # (a thread probed is visited already)
                        unique.setdefault(entry[0], entry)
            if unique and len(unique) <= group:
                # the threads left fit in one group: visited at once, with no need of their
                # newest scores (a round trip), each once whatever incarnations its members
                # name
                more.probe = None
                more.queue = deque(unique.values())
            if more.probe is not None:
                yield from self.probe_candidates(more)
                best = -more.probed[0][0] if more.probed else None
            else:
                best = more.queue[0][1] if more.queue else None
            if best is None or (heap and newer_than(heap[0][0].id, best)):
                return
            first = len(self.streams)
            while len(self.streams) - first < group:
                if more.probe is not None and more.probed:
                    thread_id = heapq.heappop(more.probed)[1]
                elif more.probe is None and more.queue:
                    thread_id = more.queue.popleft()[0]
                else:
                    break
                self.streams.append((thread_id, None))
                self.pages.append([])
                self.cursors.append(self.before_id)
            added = range(first, len(self.streams))
            yield from self.fetch(added, heads=len(self.streams) > limits.list_window)

    def probe_candidates(self, more: Candidates) -> Op[None]:
        """On a cluster, where list scores are loose by the write-ahead margin: ask the
        threads at the head of the queue their newest score with the value, while one there
        may be above every thread asked (see cluster_lists.probe)."""
        assert more.probe is not None
        while True:
            if not more.queue and not more.done:
                yield from discovery.read_candidates(self.core, more)
            if not more.queue or (more.probed and more.queue[0][1] <= -more.probed[0][0]):
                return
            count = min(self.limits.probe_group, len(more.queue))
            asked = [more.queue.popleft() for _ in range(count)]
            for thread_id, newest in (yield from cluster_lists.probe(self.core, more.probe, asked)):
                # once per thread: one deleted and written again while the list is read may
                # be met live under both incarnations
                if thread_id not in more.live:
                    more.live.add(thread_id)
                    heapq.heappush(more.probed, (-newest, thread_id))

    def make_room(self, keep: Sequence[int]) -> None:
        """Back to its head: the stream holding a page whose next checkpoint is the oldest,
        while more than limits.list_window hold one (but those in ``keep``)."""
        at, pages = self.at, self.pages
        while len(at) > self.limits.list_window:
            others = [s for s in at if s not in keep]
            if not others:
                return
            j = min(others, key=lambda s: pages[s][at[s]][1])
            pos = at.pop(j)
            ns, checkpoint_id = pages[j][pos][:2]
            pages[j] = [None] * pos + [[ns, checkpoint_id]]
            self.enter(j, pos)
