"""The query search (semantic search, a store with an index): items scored by their best cosine
with the query, as InMemoryStore scores them, on either path. The client's
(``client_vector_search``) reads every item under the prefix with its vectors, in pages; the
server's (``server_vector_search``, a vector index: ``ft.py``) reads the items its KNN names,
and hands over to the client's when it cannot settle the ranking."""

from __future__ import annotations

import heapq
import json
import math
from collections.abc import Generator, Sequence
from typing import Any

from langgraph.store.base import SearchItem, SearchOp

from . import ft
from .filters import compare_values
from .keys import encode_namespace, namespace_keys, parse_vector_doc_key, text
from .namespaces import under
from .paging import Cursor, advance, page_calls, page_size
from .rounds import Call, StoreConfig, item_lost, moment
from .search import plain_search
from .vectors import item_scores, pack, vector_scores

# A query search's reply per round stays near this many bytes of values and vectors: a page
# per namespace, as many namespaces as fit (at 1536 dims, 16 pages of 325 items: some 32 MB).
VECTOR_ROUND_BYTES = 32_000_000
# The bytes of values and vectors a page of a query search holds (one item more at most).
PAGE_BYTES = 2_000_000


def client_vector_search(
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
# to KNN_MAX: past it the search is the client's (client_vector_search). 10,000 is valkey-search's
# default bound on K.
KNN_MIN = 32
KNN_MAX = 10_000


def _knn_margin(dims: int) -> float:
    """How far the server's cosine (float32, its own sums) may be from the store's (float64
    from the same float32s), at most: a generous bound of float32 sums of ``dims`` terms."""
    return 1e-6 + dims * 2.0**-23


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


def server_vector_search(
    config: StoreConfig,
    op: SearchOp,
    namespaces: list[tuple[str, ...]],
    now: str,
    query: list[float],
) -> Generator[list[Call], list[Any], list[SearchItem]]:
    """A query search on the server's vector search: the same answer as
    :func:`client_vector_search`'s, from the candidates the index finds. The server's KNN (FLAT:
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
        return (yield from client_vector_search(config, op, namespaces, now, query))
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
            return (yield from client_vector_search(config, op, namespaces, now, query))
        found = [parse_vector_doc_key(config.prefix, d) for d in ids]
        if ask_knn:
            docs, exhausted = found, len(found) < k
        else:
            zeros_read = True
            if len(found) >= KNN_MAX:  # (more zero vectors than a reply holds)
                return (yield from client_vector_search(config, op, namespaces, now, query))
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
            return (yield from client_vector_search(config, op, namespaces, now, query))
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
