"""The store's operations, sans I/O: ``run_batch`` is a generator that yields rounds of calls
(one pipeline each) and receives their replies; ``RedisStore`` and ``AsyncRedisStore`` drive it
over a sync or an async client. It reads the batch's gets, hands each search and listing to
its module, and writes the puts, in one round after every read.

The parts, imported one way (none of them imports this module):

- rounds: ``Call``, ``Rounds``, ``errors_raised``, ``StoreConfig``, ``item_lost``, ``moment``;
  filters: InMemoryStore's filter comparisons; namespaces: labels refused, match conditions;
- paging: a namespace's pages of its index (``Cursor``, ``page_calls``, ``advance``);
- search: the plain search; semantic: the query search, on the client or on the server
  (it falls back on the plain search for items without vectors);
- sweep: which namespaces are live (``live_namespaces``) and the TTL sweep; listing:
  ``list_namespaces``, which counts the namespaces it lists by ``live_namespaces``."""

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
from .listing import list_namespaces, listing_step
from .namespaces import literal_prefix, under
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
            step = listing_step(op)
            limit = [] if step is None else ["LIMIT", 0, step]
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
            results[i] = yield from list_namespaces(config, lop, namespaces, now)
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
