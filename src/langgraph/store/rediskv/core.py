"""The store's operations, sans I/O: ``run_batch`` is a generator that yields rounds of calls
(one pipeline each) and receives their replies; ``RedisStore`` and ``AsyncRedisStore`` drive it
over a sync or an async client."""

from __future__ import annotations

import heapq
import json
import math
from collections.abc import Generator, Iterable, Sequence
from typing import Any

from langgraph.store.base import (
    GetOp,
    Item,
    ListNamespacesOp,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
)

from . import ft
from .filters import compare_values
from .keys import (
    encode_namespace,
    index_member,
    index_namespace,
    namespace_index_key,
    namespace_keys,
    namespace_tags,
    parse_vector_doc_key,
    prefix_range,
    text,
)
from .namespaces import does_match, literal_prefix, under
from .paging import Cursor, advance, page_calls, page_size
from .rounds import Call, Rounds, StoreConfig, item_lost, moment
from .search import plain_search
from .vectors import Embedding, item_scores, pack, vector_scores


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
                results[i] = yield from _server_vector_search(config, sop, namespaces, now, query)
            elif query and config.dims is not None:
                results[i] = yield from _vector_search(config, sop, namespaces, now, query)
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


# A query search's reply per round stays near this many bytes of values and vectors: a page
# per namespace, as many namespaces as fit (at 1536 dims, 16 pages of 325 items: some 32 MB).
VECTOR_ROUND_BYTES = 32_000_000
# The bytes of values and vectors a page of a query search holds (one item more at most).
PAGE_BYTES = 2_000_000


def _vector_search(
    config: StoreConfig,
    op: SearchOp,
    namespaces: list[tuple[str, ...]],
    now: str,
    query: list[float],
) -> Generator[list[Call], list[Any], list[SearchItem]]:
    """An exact search: every item under the prefix that the filter keeps, read with its
    vectors in pages of each namespace's index, scored by its best cosine with the query as
    each round comes in; only the best ``offset + limit`` so far are kept, so the client holds
    one round and those. Scored items first, best first; then the items without vectors,
    newest-updated first; ties go newest-updated first, then to the namespace that sorts
    first. Offset and limit apply to that whole order."""
    assert config.dims is not None
    if op.limit <= 0 or not namespaces:
        return []
    need = op.offset + op.limit
    # a page's reply stays near PAGE_BYTES of values and vectors (one vector an item most
    # often; the script ends a page of items with many at PAGE_BYTES, store_page.lua)
    page = page_size(PAGE_BYTES // (4 * config.dims))
    # namespaces a round: from a full round of full pages, then as many as the bytes the
    # last round brought say fit (at most four times as many: small namespaces of small
    # vectors go a few rounds, not one per PAGE_BYTES)
    per_round = max(1, VECTOR_ROUND_BYTES // PAGE_BYTES)
    cursors = [Cursor(n) for n in namespaces]
    # (order key, (namespace, key, value JSON or parsed, created µs, updated µs, score))
    kept: list[tuple[tuple[Any, ...], tuple[Any, ...]]] = []
    while True:
        wanted = [c for c in cursors if not c.done][:per_round]
        if not wanted:
            break
        # (read without renewing: a query reads every item under the prefix, and only those
        # it returns are renewed, below, as PostgresStore does)
        replies = yield page_calls(config, wanted, now, "0", page, vector_bytes=PAGE_BYTES)
        found: list[tuple[Any, ...]] = []
        blobs: list[bytes] = []
        held = 0
        for c, reply in zip(wanted, replies, strict=True):
            body = advance(config, c, reply, page)
            held += sum(len(body[j + 1]) + len(body[j + 4]) for j in range(0, len(body), 5))
            for j in range(0, len(body), 5):
                value: Any = body[j + 1]
                if op.filter:
                    value = json.loads(value)
                    if not all(compare_values(value.get(k), v) for k, v in op.filter.items()):
                        continue
                updated = int(float(text(body[j + 3])))
                found.append((c.namespace, body[j], value, body[j + 2], updated))
                blobs.append(body[j + 4])
        per_round = min(4 * per_round, per_round * VECTOR_ROUND_BYTES // max(held, 1)) or 1
        scores = item_scores(query, blobs, config.dims)
        for item, score in zip(found, scores, strict=True):
            order = (score is None, -(score or 0.0), -item[4], encode_namespace(item[0]))
            kept.append((order, (*item, score)))
        if len(kept) > 2 * need:
            kept = heapq.nsmallest(need, kept, key=lambda k: k[0])
    chosen = heapq.nsmallest(need, kept, key=lambda k: k[0])[op.offset :]
    if op.refresh_ttl and chosen:
        yield [
            ("script", "store_get", namespace_keys(config.prefix, item[0]), [now, "1", item[1]])
            for _, item in chosen
        ]
    out = []
    for _, (namespace, key, value, created, updated, score) in chosen:
        out.append(
            SearchItem(
                namespace=namespace,
                key=text(key),
                value=json.loads(value) if isinstance(value, (bytes, str)) else value,
                created_at=moment(created),
                updated_at=moment(updated),
                score=score,
            )
        )
    return out


# The first KNN of a query search asks for this many vectors at least (4 times offset + limit
# with a filter, twice without), then four times as many while the ranking is not settled, up
# to KNN_MAX: past it the search is the client's (_vector_search). 10,000 is valkey-search's
# default bound on K.
KNN_MIN = 32
KNN_MAX = 10_000


def _knn_margin(dims: int) -> float:
    """How far the server's cosine (float32, its own sums) may be from the store's (float64
    from the same float32s), at most: a generous bound of float32 sums of ``dims`` terms."""
    return 1e-6 + dims * 2.0**-23


def _command(args: Sequence[Any]) -> Call:
    return ("command", args[0], list(args[1:]), ())


def _attempt(args: Sequence[Any]) -> Call:
    """A command whose error comes back as its reply (the driver raises any other's)."""
    return ("attempt", args[0], list(args[1:]), ())


def _scored(
    config: StoreConfig,
    op: SearchOp,
    namespace: tuple[str, ...],
    key: str,
    reply: Any,
    query: list[float],
) -> tuple[Any, ...] | None:
    """An item a query search read (store_get with its vectors): (namespace, key, value,
    created µs, updated µs, score, cosines of its vectors), value None when the filter drops
    it; None when it is gone. A lost part raises."""
    assert config.dims is not None
    if reply and isinstance(reply[0], int):
        raise item_lost(config, namespace, key, reply[1])
    if not reply:
        return None
    value: Any = reply[0]
    if op.filter:
        value = json.loads(value)
        if not all(compare_values(value.get(f), v) for f, v in op.filter.items()):
            value = None
    (cosines,) = vector_scores(query, [reply[3]], config.dims)
    score = max(cosines) if cosines else None
    return (namespace, key, value, reply[1], int(float(text(reply[2]))), score, cosines)


def _server_vector_search(
    config: StoreConfig,
    op: SearchOp,
    namespaces: list[tuple[str, ...]],
    now: str,
    query: list[float],
) -> Generator[list[Call], list[Any], list[SearchItem]]:
    """A query search on the server's vector search: the same answer as
    :func:`_vector_search`'s, from the candidates the index finds. The server's KNN (FLAT:
    exact, with the namespace prefix as a tag pre-filter) names the vectors nearest the query;
    the store reads their items (expired ones dropped, as any read), applies the filter and
    scores each item by its best cosine as the client path does (so the scores are
    InMemoryStore's). It asks for more vectors (K times 4) until the ranking is settled: the
    ``offset + limit``-th best item that passes scores above anything the vectors not yet
    returned can score (the least cosine returned, plus the margin between the server's float32
    cosine and the store's; 0 for zero vectors, which the index holds apart, until they are
    read). Past KNN_MAX the search goes to the client path. Once the KNN has returned every
    vector under the prefix, items without vectors follow, newest-updated first, read as the
    plain search reads them."""
    assert config.dims is not None
    dims = config.dims
    if op.limit <= 0 or not namespaces:
        return []
    if not any(query):  # (every cosine is 0: the order is the updates')
        return (yield from _vector_search(config, op, namespaces, now, query))
    need = op.offset + op.limit
    blob = pack(query, dims, "")
    margin = 2 * _knn_margin(dims)
    k = max(KNN_MIN, need * (4 if op.filter else 2))
    # (namespace, key) -> (namespace, key, value, created µs, updated µs, score, cosines), or
    # None: gone, or outside the prefix (a tag collision)
    read: dict[tuple[tuple[str, ...], str], tuple[Any, ...] | None] = {}
    docs: list[tuple[tuple[str, ...], str, int]] = []  # the last KNN's vectors
    ask_knn, zeros_read, exhausted = True, False, False
    while True:
        calls: list[Call] = []
        if ask_knn:
            calls.append(_attempt(ft.knn_args(config.prefix, op.namespace_prefix, blob, k)))
        else:  # (the zero vectors are wanted: the KNN has settled what it can)
            calls.append(_attempt(ft.zero_args(config.prefix, op.namespace_prefix, KNN_MAX)))
        (reply,) = yield calls
        ids = ft.search_ids(reply)
        if ids is None:  # (an error, a timeout: not the whole answer) the client's search
            return (yield from _vector_search(config, op, namespaces, now, query))
        found = [parse_vector_doc_key(config.prefix, d) for d in ids]
        if ask_knn:
            docs, exhausted = found, len(found) < k
        else:
            zeros_read = True
            if len(found) >= KNN_MAX:  # (more zero vectors than a reply holds)
                return (yield from _vector_search(config, op, namespaces, now, query))
        wanted = list(dict.fromkeys((n, key) for n, key, _ in found if (n, key) not in read))
        for n, key in wanted:
            if not under(n, op.namespace_prefix):  # (a tag collision)
                read[(n, key)] = None
        wanted = [w for w in wanted if w not in read]
        if wanted:
            got = yield [
                ("script", "store_get", namespace_keys(config.prefix, n), [now, "0", key, "1"])
                for n, key in wanted
            ]
            for (n, key), item in zip(wanted, got, strict=True):
                read[(n, key)] = _scored(config, op, n, key, item, query)
        # what an item not yet read can score at most: the least cosine the last KNN returned
        # (of a vector whose item was read), plus the margin; 0 while the zero vectors are
        # not read
        bound = -math.inf
        if not exhausted:
            returned = [
                item[6][i]
                for n, key, i in docs
                if (item := read.get((n, key))) is not None and i < len(item[6])
            ]
            bound = (min(returned) if returned else math.inf) + margin
        ranked = sorted(
            (
                ((-item[5], -item[4], encode_namespace(item[0])), item)
                for item in read.values()
                if item is not None and item[2] is not None and item[5] is not None
            ),
            key=lambda entry: entry[0],
        )
        last = ranked[need - 1][1][5] if len(ranked) >= need else None
        if (exhausted and zeros_read) or (
            last is not None and last > (bound if zeros_read else max(bound, 0.0))
        ):
            break
        if not zeros_read and (exhausted or (last is not None and last > bound)):
            ask_knn = False
            continue
        if k >= KNN_MAX:
            return (yield from _vector_search(config, op, namespaces, now, query))
        ask_knn, k = True, min(KNN_MAX, 4 * k)
    chosen = [
        SearchItem(
            namespace=namespace,
            key=key,
            value=json.loads(value) if isinstance(value, (bytes, str)) else value,
            created_at=moment(created),
            updated_at=moment(updated),
            score=score,
        )
        for _, (namespace, key, value, created, updated, score, _) in ranked[:need]
    ]
    if len(chosen) < need:
        # every vector under the prefix was returned: the items without vectors follow, newest
        # first (the plain search's pages, less the items scored above; an item the index led
        # to that has no vectors now, its v evicted, is one of them)
        scored = {(entry[1][0], entry[1][1]) for entry in ranked}
        plain = SearchOp(op.namespace_prefix, op.filter, limit=need, offset=0, refresh_ttl=False)
        for item in (yield from plain_search(config, plain, namespaces, now)):
            if len(chosen) < need and (tuple(item.namespace), item.key) not in scored:
                chosen.append(item)
    chosen = chosen[op.offset :]
    if op.refresh_ttl and chosen:
        yield [
            (
                "script",
                "store_get",
                namespace_keys(config.prefix, tuple(c.namespace)),
                [now, "1", c.key],
            )
            for c in chosen
        ]
    return chosen


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
