"""The invariant checker: every inconsistency among the keys of one prefix.

It reports index entries whose key is missing, checkpoints whose blobs are missing, and keys
that no index leads to (a checkpoint without its index entry, an orphan blob or writes hash).
On a store with a TTL, keys that expire one after the other can show up briefly while they go.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from .core import Batch, Op, SaverCore, ScanKeys

ORPHAN = "key not reachable from any index"


@dataclass(frozen=True, slots=True)
class Problem:
    """One inconsistency: what is wrong, and the key it concerns."""

    problem: str
    key: str

    def __str__(self) -> str:
        return f"{self.problem}: {self.key}"


def _tag_of(key: str) -> str | None:
    start = key.find("{")
    end = key.find("}", start)
    return key[start : end + 1] if start >= 0 and end > start else None


def check_store(core: SaverCore) -> Op[list[Problem]]:
    """Scan every key under the prefix and check each thread's indexes; returns the problems
    sorted by key (an empty list for a consistent store)."""
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
    tags = sorted(keys_by_tag)
    for start in range(0, len(tags), 500):
        chunk = tags[start : start + 500]
        replies = yield Batch(
            [core.thread_call("check_thread", core.keys.thread_from_tag(tag)) for tag in chunk]
        )
        for tag, (flat, reachable) in zip(chunk, replies, strict=True):
            pairs = zip(flat[::2], flat[1::2], strict=True)
            problems += [Problem(p.decode(), k.decode()) for p, k in pairs]
            problems += [
                Problem(ORPHAN, k) for k in keys_by_tag[tag] - {r.decode() for r in reachable}
            ]
    return sorted(problems, key=lambda p: (p.key, p.problem))
