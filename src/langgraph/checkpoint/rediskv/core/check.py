"""The invariant checker: every inconsistency among the keys of one prefix.

It reports index entries whose key is missing, checkpoints whose blobs are missing, writes
stored for a checkpoint that is not in its namespace index, and keys that no index leads to (a
checkpoint without its index entry, an orphan blob or writes hash; a blob that only an
unreadable record may reference is not an orphan). Each thread is checked in
bounded steps (``lua/check_thread.lua``), so a giant thread never holds the server for long.
A thread with jobs still pending (a delete, prune or copy whose client died midway, see
``core/jobs.py``) is reaped first. On a store with a TTL, keys that expire one after the other can
show up until a reader or a put sweeps the entries that pointed at them: such problems are
``stale`` (see STALE), and ``rediskv doctor`` reports them as a warning, not a failure.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

from . import calls, cluster_lists, discovery, jobs
from .requests import Arg, Batch, Op, ScanKeys, ScriptCall
from .saver import SaverCore

ORPHAN = "key not reachable from any index"
EXPIRING_ORPHAN = "key not reachable from any index, expiring"
# a blob no readable record lists, in a namespace with a record the scripts cannot parse: that
# record may list it (a layout another release reads, or one cut short with its bv whole), so
# it is not an orphan to remove (remove_orphans); it goes with the record (delete_thread)
UNREADABLE_BLOB = "blob that only an unreadable record may reference"
# Index entries a record lists that its indexes lost (an eviction took the index, or the
# thread's own threads-by-value set): reindex_metadata writes them again from the records.
LOST_INDEX_ENTRIES = frozenset(
    {
        "checkpoint without its metadata index entry",
        "thread missing from a threads-by-value index",
        "threads-by-value index scores the thread below a checkpoint",
        "threads-by-value index missing from the thread's values",
    }
)
# keys examined per check_thread call (about 10 ms of server time)
CHECK_STEP = 1000


# Entries that point at a key that is gone. On a store with a ttl this is how keys expire:
# the entry outlives its key (an index must outlive its entries, never the reverse), readers
# skip such entries and remove them as they meet them, and puts sweep a few at random. They
# cost memory until then, never a wrong answer; without a ttl they mean a key was lost.
STALE = frozenset(
    {
        "namespace without index",
        "index entry without checkpoint",
        "writes index entry without writes",
        "run without run index",
        "run index entry without checkpoint",
        EXPIRING_ORPHAN,
    }
)


@dataclass(frozen=True, slots=True)
class Problem:
    """One inconsistency: what is wrong, and the key it concerns."""

    problem: str
    key: str

    @property
    def stale(self) -> bool:
        """An entry whose key is gone (see STALE): expected on a store with a ttl."""
        return self.problem in STALE

    def __str__(self) -> str:
        return f"{self.problem}: {self.key}"


def _tag_of(key: str) -> str | None:
    start = key.find("{")
    end = key.find("}", start)
    return key[start : end + 1] if start >= 0 and end > start else None


def _scan(core: SaverCore) -> Op[tuple[dict[str, set[str]], list[Problem]]]:
    keys_by_tag: dict[str, set[str]] = defaultdict(set)
    problems: list[Problem] = []
    for raw in (yield ScanKeys(core.keys.all_keys_pattern())):
        key = raw.decode()
        if core.keys.is_global(key):
            continue  # global; each checkpoint's own entries are checked with its thread
        tag = _tag_of(key)
        if tag is None:
            problems.append(Problem("key outside the key schema", key))
        else:
            keys_by_tag[tag].add(key)
    return keys_by_tag, problems


def _check_call(
    core: SaverCore, tag: str, mode: str, cursor: Sequence[Arg], lists_ready: bool
) -> ScriptCall:
    return calls.check_thread(
        core.keys.thread(tag),
        core.keys.runs(tag),
        prefix=core.keys.prefix,
        tag=tag,
        mode=mode,
        cursor_or_keys=cursor,
        budget=CHECK_STEP,
        lists_complete="1" if lists_ready else "0",
    )


def _check_lists(core: SaverCore, tags: Sequence[str]) -> Op[list[Problem]]:
    """On a cluster: every list a thread's bounds name holds the thread's entry with at least
    that score (lua/include/lists.lua)."""
    problems: list[Problem] = []
    for start in range(0, len(tags), core.limits.batch_size):
        chunk = tags[start : start + core.limits.batch_size]
        states = yield Batch([cluster_lists.state_call(core, tag, "*") for tag in chunk])
        wanted: list[tuple[str, str, float]] = []  # (list key, member, bound)
        for tag, flat in zip(chunk, states, strict=True):
            fields = {f.decode(): v.decode() for f, v in zip(flat[::2], flat[1::2], strict=True)}
            inc = fields.pop("", None)
            for suffix, bound in fields.items():
                if inc is not None and not suffix.startswith("@"):
                    wanted.append((core.keys.threads_with(suffix), tag + inc, float(bound)))
        if not wanted:
            continue
        scores = yield Batch(
            [
                calls.sweep_thread_list(key, mode="score", operands=(member,))
                for key, member, _ in wanted
            ]
        )
        for (key, member, bound), score in zip(wanted, scores, strict=True):
            if score is None or float(score) < bound:
                problems.append(Problem(f"list without the thread's entry {member!r}", key))
    return problems


def check_store(core: SaverCore) -> Op[list[Problem]]:
    """Scan every key under the prefix and check each thread's indexes; returns the problems
    sorted by key (an empty list for a consistent store)."""
    keys_by_tag, problems = yield from _scan(core)
    pending = [tag for tag in keys_by_tag if core.keys.gc(tag) in keys_by_tag[tag]]
    if pending:
        # finish what interrupted operations left, then look again
        yield from jobs.run_jobs(core, [(tag, jobs.reap_call(core, tag)) for tag in pending])
        keys_by_tag, problems = yield from _scan(core)
    found: set[Problem] = set(problems)
    lists_ready = core.cluster_lists and (yield from discovery.lists_ready(core))
    if core.cluster_lists:
        with_bounds = sorted(
            t for t, keys in keys_by_tag.items() if core.keys.thread_bounds(t) in keys
        )
        found.update((yield from _check_lists(core, with_bounds)))
    reachable: dict[str, set[str]] = defaultdict(set)
    # per thread: its walk ("ns", then "runs") and cursor, until both are done
    walks: dict[str, tuple[str, Sequence[Arg]]] = {
        tag: ("ns", jobs.START_CURSOR) for tag in keys_by_tag
    }
    while walks:
        tags = sorted(walks)
        for start in range(0, len(tags), core.limits.batch_size):
            chunk = tags[start : start + core.limits.batch_size]
            replies = yield Batch(
                [_check_call(core, tag, *walks[tag], lists_ready) for tag in chunk]
            )
            for tag, (flat, keys, cursor) in zip(chunk, replies, strict=True):
                pairs = zip(flat[::2], flat[1::2], strict=True)
                found.update(Problem(p.decode(), k.decode()) for p, k in pairs)
                reachable[tag].update(k.decode() for k in keys)
                mode = walks[tag][0]
                if cursor is not None:
                    walks[tag] = (mode, list(cursor))
                elif mode == "ns":
                    walks[tag] = ("runs", jobs.START_CURSOR)
                else:
                    del walks[tag]
    orphans = {tag: sorted(keys - reachable[tag]) for tag, keys in keys_by_tag.items()}
    # "P:blob:{T}:N:" of each namespace with an unreadable record "P:cp:{T}:N:ID" (an encoded
    # part holds no ":", so the stem names one namespace)
    cp_start, blob_start = f"{core.keys.prefix}:cp:", f"{core.keys.prefix}:blob:"
    unreadable_stems = tuple(
        blob_start + p.key[len(cp_start) :].rsplit(":", 1)[0] + ":"
        for p in found
        if p.problem == "unreadable record" and p.key.startswith(cp_start)
    )
    orphans = {tag: keys for tag, keys in orphans.items() if keys}
    tags = sorted(orphans)
    for start in range(0, len(tags), core.limits.batch_size):
        chunk = tags[start : start + core.limits.batch_size]
        ttls = [
            calls.check_thread(
                core.keys.thread(tag),
                core.keys.runs(tag),
                prefix=core.keys.prefix,
                tag=tag,
                mode="ttl",
                cursor_or_keys=orphans[tag],
            )
            for tag in chunk
        ]
        replies = yield Batch(ttls)
        for tag, lefts in zip(chunk, replies, strict=True):
            for key, left in zip(orphans[tag], lefts, strict=True):
                # with an expiry it goes by itself (a blob that outlived the checkpoints that
                # shared it, under a shorter ttl): stale; without one it is a leak
                if left == -2:
                    continue
                if unreadable_stems and key.startswith(unreadable_stems):
                    found.add(Problem(UNREADABLE_BLOB, key))
                else:
                    found.add(Problem(ORPHAN if left == -1 else EXPIRING_ORPHAN, key))
    return sorted(found, key=lambda p: (p.key, p.problem))
