"""The store's operations, sans I/O: ``run_batch`` is a generator that yields rounds of calls
(one pipeline each) and receives their replies; ``RedisStore`` and ``AsyncRedisStore`` drive it
over a sync or an async client."""

from __future__ import annotations

import json
from collections.abc import Generator, Iterable, Sequence
from typing import Any

from langgraph.store.base import (
    GetOp,
    Item,
    ListNamespacesOp,
    Op,
    PutOp,
    Result,
    SearchOp,
)

from .keys import (
    index_member,
    index_namespace,
    namespace_index_key,
    namespace_keys,
    namespace_tags,
    prefix_range,
    text,
)
from .namespaces import does_match, literal_prefix, under
from .rounds import Call, Rounds, StoreConfig, item_lost, moment
from .search import plain_search
from .semantic import client_vector_search, server_vector_search
from .vectors import Embedding


def _put_calls(config: StoreConfig, op: PutOp, now: str, stamp: str, vectors: bytes) -> list[Call]:
    keys = namespace_keys(config.prefix, op.namespace)
    if op.value is None:
        return [("script", "store_put", keys, [now, op.key, "", stamp, "", "", ""])]
    ttl = op.ttl
    ttl_ms = "" if ttl is None else str(int(float(ttl) * 60_000))
    value = json.dumps(op.value, separators=(",", ":"), ensure_ascii=False)
    ahead: Call = (
        "command",
        "ZADD",
        [namespace_index_key(config.prefix), 0, index_member(op.namespace)],
        (),
    )
    # (ARGV[7]: the namespace's tags, for the vectors' documents of the server's search)
    tags = namespace_tags(op.namespace) if config.server_search else ""
    args = [now, op.key, value, stamp, ttl_ms, vectors, tags]
    put: Call = ("script", "store_put", keys, args)
    return [ahead, put]


def run_batch(config: StoreConfig, ops: Iterable[Op], embedding: Embedding | None = None) -> Rounds:
    """Every op of the batch: reads see the store as it was before the batch's puts (as
    InMemoryStore), the puts go in the last round, the last put of an item winning.
    ``embedding``: the vectors of the batch's puts and queries (``vectors.plan`` and
    ``embed``), when the store has an index."""
    ops = list(ops)
    embedding = embedding or Embedding()
    results: list[Result] = [None] * len(ops)
    # "": the scripts read the server's clock
    now = "" if config.clock is None else str(config.clock())
    puts: dict[tuple[tuple[str, ...], str], PutOp] = {}
    first: list[Call] = []
    slots: list[tuple[int, str]] = []
    index = namespace_index_key(config.prefix)
    for i, op in enumerate(ops):
        if isinstance(op, GetOp):
            keys = namespace_keys(config.prefix, op.namespace)
            refresh = "1" if op.refresh_ttl else "0"
            first.append(("script", "store_get", keys, [now, refresh, op.key]))
            slots.append((i, "get"))
        elif isinstance(op, SearchOp):
            low, high = prefix_range(op.namespace_prefix)
            first.append(("command", "ZRANGEBYLEX", [index, low, high], ()))
            slots.append((i, "search"))
        elif isinstance(op, ListNamespacesOp):
            low, high = prefix_range(literal_prefix(op.match_conditions))
            limit = [] if listing_step(op) is None else ["LIMIT", 0, listing_step(op)]
            first.append(("command", "ZRANGEBYLEX", [index, low, high, *limit], ()))
            slots.append((i, "list"))
        elif isinstance(op, PutOp):
            puts[(op.namespace, op.key)] = op
        else:
            raise ValueError(f"Unknown operation type: {type(op)}")
    if first:
        replies = yield first
        searches: list[tuple[int, SearchOp, list[tuple[str, ...]]]] = []
        listings: list[tuple[int, ListNamespacesOp, list[tuple[str, ...]]]] = []
        for (i, kind), reply in zip(slots, replies, strict=True):
            op = ops[i]
            if kind == "get":
                assert isinstance(op, GetOp)
                if reply and isinstance(reply[0], int):
                    raise item_lost(config, op.namespace, op.key, reply[1])
                results[i] = (
                    None
                    if not reply
                    else Item(
                        value=json.loads(reply[0]),
                        key=op.key,
                        namespace=op.namespace,
                        created_at=moment(reply[1]),
                        updated_at=moment(reply[2]),
                    )
                )
            elif kind == "search":
                assert isinstance(op, SearchOp)
                found = [index_namespace(text(m)) for m in reply]
                searches.append((i, op, [n for n in found if under(n, op.namespace_prefix)]))
            else:
                assert isinstance(op, ListNamespacesOp)
                listings.append((i, op, [index_namespace(text(m)) for m in reply]))
        for i, sop, namespaces in searches:
            query = embedding.queries.get(sop.query) if sop.query else None
            if query and config.dims is not None and config.server_search:
                results[i] = yield from server_vector_search(config, sop, namespaces, now, query)
            elif query and config.dims is not None:
                results[i] = yield from client_vector_search(config, sop, namespaces, now, query)
            else:
                results[i] = yield from plain_search(config, sop, namespaces, now)
        for i, lop, namespaces in listings:
            results[i] = yield from _list_namespaces(config, lop, namespaces, now)
    if puts:
        # the scripts stamp a put on the server's clock, above its namespace's newest (so
        # the puts of a batch keep their order); a virtual clock's stamps go with the calls
        first_stamp = None if config.clock is None else int(now) * 1000
        yield from _put_round(
            config,
            [
                (
                    op,
                    "" if first_stamp is None else str(first_stamp + n),
                    embedding.vectors.get((op.namespace, op.key), b""),
                )
                for n, op in enumerate(puts.values())
            ],
            now,
        )
    return results


# a put of _put_round: the op, its updated_at stamp ("": the server's clock), its vectors
PutEntry = tuple[PutOp, str, bytes]


def _put_round(
    config: StoreConfig, entries: Sequence[PutEntry], now: str
) -> Generator[list[Call], list[Any], None]:
    """The puts in one round, in order; then a namespace that was empty before its put is
    written into the global index once more (a sweep may have removed it meanwhile)."""
    calls: list[Call] = []
    owners: list[str | None] = []  # per call: the namespace of a put script, else None
    for op, stamp, vectors in entries:
        for call in _put_calls(config, op, now, stamp, vectors):
            calls.append(call)
            put = call[0] == "script" and op.value is not None
            owners.append(index_member(op.namespace) if put else None)
    replies = yield calls
    index = namespace_index_key(config.prefix)
    again: list[Call] = [
        ("command", "ZADD", [index, 0, owner], ())
        for owner, reply in zip(owners, replies, strict=True)
        if owner is not None and int(reply) == 1
    ]
    if again:
        yield again


def _alive(
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
    _, purged = yield from _alive(config, namespaces, now)
    return purged, text(names[-1]) if len(names) == count else ""


def listing_step(op: ListNamespacesOp) -> int | None:
    """How many index entries a listing reads at a time, when it can stop at its page: no
    condition but one prefix without wildcards (the index, in the order of the tuples, then
    holds the answer in order: index_member; with a max_depth, in the order of the cut
    namespaces); else None (it reads every namespace under its prefix)."""
    conditions = op.match_conditions or ()
    if len(conditions) > 1 or (op.max_depth is not None and op.max_depth < 1):
        return None
    if conditions and (conditions[0].match_type != "prefix" or "*" in conditions[0].path):
        return None
    return max(op.offset + op.limit, LISTING_STEP_MIN)


LISTING_STEP_MIN = 64


def _list_namespaces(
    config: StoreConfig, op: ListNamespacesOp, namespaces: list[tuple[str, ...]], now: str
) -> Generator[list[Call], list[Any], list[tuple[str, ...]]]:
    """The live namespaces the index names (the empty ones are swept from it). A listing
    that can stop at its page (listing_step) reads the index a step at a time until it has
    ``offset + limit`` live namespaces; else every namespace under its prefix."""
    step = listing_step(op)
    if step is not None and op.max_depth is not None:  # (listing_step: max_depth >= 1)
        return (yield from _list_cut_namespaces(config, op, namespaces, now, step, op.max_depth))
    if step is not None:
        need = op.offset + op.limit
        live: list[tuple[str, ...]] = []
        page = namespaces
        _, high = prefix_range(literal_prefix(op.match_conditions))
        index = namespace_index_key(config.prefix)
        while True:
            alive, _ = yield from _alive(config, page, now)
            live += alive
            if len(live) >= need or len(page) < step:
                return live[op.offset : need]
            after = "(" + index_member(page[-1])
            (names,) = yield [
                ("command", "ZRANGEBYLEX", [index, after, high, "LIMIT", 0, step], ())
            ]
            page = [index_namespace(text(m)) for m in names]
    namespaces, _ = yield from _alive(config, namespaces, now)
    if op.match_conditions:
        namespaces = [n for n in namespaces if all(does_match(c, n) for c in op.match_conditions)]
    if op.max_depth is not None:
        namespaces = sorted({n[: op.max_depth] for n in namespaces})
    else:
        namespaces = sorted(namespaces)
    return namespaces[op.offset : op.offset + op.limit]


def _list_cut_namespaces(
    config: StoreConfig,
    op: ListNamespacesOp,
    page: list[tuple[str, ...]],
    now: str,
    step: int,
    depth: int,
) -> Generator[list[Call], list[Any], list[tuple[str, ...]]]:
    """A listing with a max_depth: the live namespaces cut to ``depth`` labels, walked in
    the index's order from ``page`` (its first step). Once a cut namespace is found, the
    walk jumps past every namespace under it (to its member followed by "\\x01"): the
    namespaces of 20,000 users cut to ("users", u) cost a step per ``step`` users, not one
    per namespace. A cut counts when one namespace under it is live: the first of each is
    asked, then the others of those whose first was empty."""
    need = op.offset + op.limit
    _, high = prefix_range(literal_prefix(op.match_conditions))
    index = namespace_index_key(config.prefix)
    found: list[tuple[str, ...]] = []
    while page:
        groups: dict[tuple[str, ...], list[tuple[str, ...]]] = {}
        for namespace in page:
            groups.setdefault(namespace[:depth], []).append(namespace)
        live = set((yield from _alive(config, [g[0] for g in groups.values()], now))[0])
        rest = [n for g in groups.values() if g[0] not in live for n in g[1:]]
        if rest:
            live.update((yield from _alive(config, rest, now))[0])
        for cut, group in groups.items():
            if any(n in live for n in group) and (not found or found[-1] != cut):
                found.append(cut)
        if len(found) >= need or len(page) < step:
            break
        cut = page[-1][:depth]
        # past the cut's namespaces when it was found (a namespace shorter than the depth is
        # its own cut: the longer ones under it are cuts of their own), else on after the
        # last one read
        after = (
            f"[{index_member(cut)}\x01"
            if found and found[-1] == cut and len(cut) == depth
            else f"({index_member(page[-1])}"
        )
        (names,) = yield [("command", "ZRANGEBYLEX", [index, after, high, "LIMIT", 0, step], ())]
        page = [index_namespace(text(m)) for m in names]
    return found[op.offset : need]
