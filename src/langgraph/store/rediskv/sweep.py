"""The liveness of namespaces: which ones of the global index hold live items (their expired
items purged, the empty ones swept from the index), and the TTL sweep, bounded steps along the
index that do the same to every namespace."""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

from .keys import index_member, index_namespace, namespace_index_key, namespace_keys, text
from .rounds import Call, StoreConfig


def live_namespaces(
    config: StoreConfig, namespaces: list[tuple[str, ...]], now: str
) -> Generator[list[Call], list[Any], tuple[list[tuple[str, ...]], int]]:
    """The namespaces that hold live items (their expired ones purged, at most 100 each:
    how many goes with them); the empty ones are swept from the global index."""
    if not namespaces:
        return [], 0
    replies = yield [
        ("script", "store_alive", namespace_keys(config.prefix, n), [now]) for n in namespaces
    ]
    purged = sum(int(reply[1]) for reply in replies)
    alive = [n for n, reply in zip(namespaces, replies, strict=True) if int(reply[0]) > 0]
    empty = [n for n, reply in zip(namespaces, replies, strict=True) if int(reply[0]) <= 0]
    if empty:
        index = namespace_index_key(config.prefix)
        yield [("command", "ZREM", [index, *map(index_member, empty)], ())]
        # a put may have filled one between its count and the ZREM (its own ZADD came
        # before): counted again after the ZREM, such a namespace goes back in the index
        again = yield [
            ("script", "store_alive", namespace_keys(config.prefix, n), [now]) for n in empty
        ]
        filled = [n for n, reply in zip(empty, again, strict=True) if int(reply[0]) > 0]
        if filled:
            members = [m for n in filled for m in (0, index_member(n))]
            yield [("command", "ZADD", [index, *members], ())]
    return alive, purged


def run_sweep(
    config: StoreConfig, after: str, count: int
) -> Generator[list[Call], list[Any], tuple[int, str]]:
    """One bounded step of the TTL sweep: the ``count`` namespaces of the global index after
    ``after`` ("": from the first) purge their expired items (at most 100 each) and the empty
    ones leave the index. Returns the items removed and where the next step starts ("": the
    index is done)."""
    low = "-" if not after else f"({after}"
    index = namespace_index_key(config.prefix)
    (names,) = yield [("command", "ZRANGEBYLEX", [index, low, "+", "LIMIT", 0, count], ())]
    namespaces = [index_namespace(text(m)) for m in names]
    now = "" if config.clock is None else str(config.clock())
    _, purged = yield from live_namespaces(config, namespaces, now)
    return purged, text(names[-1]) if len(names) == count else ""
