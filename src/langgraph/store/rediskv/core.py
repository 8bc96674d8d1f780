"""The store's operations, sans I/O: ``run_batch`` is a generator that yields rounds of calls
(one pipeline each) and receives their replies; ``RedisStore`` and ``AsyncRedisStore`` drive it
over a sync or an async client."""

from __future__ import annotations

import heapq
import json
from collections.abc import Callable, Generator, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any

from langgraph.store.base import (
    GetOp,
    InvalidNamespaceError,
    Item,
    ListNamespacesOp,
    MatchCondition,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
    TTLConfig,
)

from langgraph.checkpoint.rediskv.errors import StoreItemLostError

from .keys import (
    decode_namespace,
    encode_namespace,
    namespace_index_key,
    namespace_keys,
    prefix_range,
)
from .vectors import Embedding, item_scores

# A call: ("script", name, keys, args) or ("command", name, args, ())
Call = tuple[str, str, Sequence[Any], Sequence[Any]]
Rounds = Generator[list[Call], list[Any], list[Result]]

PAGE_MIN = 16
PAGE_MAX = 512


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _moment(us: Any) -> datetime:
    return datetime.fromtimestamp(int(float(_text(us))) / 1_000_000, tz=timezone.utc)


# The filter semantics of InMemoryStore (langgraph.store.memory), kept here as it defines them.
def compare_values(item_value: Any, filter_value: Any) -> bool:
    """Whether ``item_value`` matches ``filter_value`` (nested equality, $-operators)."""
    if isinstance(filter_value, dict):
        if any(k.startswith("$") for k in filter_value):
            return all(apply_operator(item_value, k, v) for k, v in filter_value.items())
        if not isinstance(item_value, dict):
            return False
        return all(compare_values(item_value.get(k), v) for k, v in filter_value.items())
    if isinstance(filter_value, (list, tuple)):
        return (
            isinstance(item_value, (list, tuple))
            and len(item_value) == len(filter_value)
            and all(compare_values(i, f) for i, f in zip(item_value, filter_value, strict=False))
        )
    return bool(item_value == filter_value)


def apply_operator(value: Any, operator: str, op_value: Any) -> bool:
    """One comparison operator, as InMemoryStore applies it."""
    if operator == "$eq":
        return bool(value == op_value)
    if operator == "$gt":
        return float(value) > float(op_value)
    if operator == "$gte":
        return float(value) >= float(op_value)
    if operator == "$lt":
        return float(value) < float(op_value)
    if operator == "$lte":
        return float(value) <= float(op_value)
    if operator == "$ne":
        return bool(value != op_value)
    raise ValueError(f"Unsupported operator: {operator}")


def check_namespaces(ops: Sequence[Op]) -> None:
    """Refuse an op whose namespace labels BaseStore's methods refuse (not a string, empty, a
    period, a NUL byte), before anything is embedded or sent: ``batch`` takes ops that did not
    go through those methods, and here the label ``"a.b"`` would be the namespace ``("a", "b")``
    (keys.py). As ``PostgresStore`` does, with BaseStore's messages."""
    for op in ops:
        if isinstance(op, (GetOp, PutOp)):
            paths = [op.namespace]
        elif isinstance(op, SearchOp):
            paths = [op.namespace_prefix]
        elif isinstance(op, ListNamespacesOp):
            paths = [c.path for c in op.match_conditions or ()]
        else:
            continue
        for namespace in paths:
            for label in namespace:
                if not isinstance(label, str):
                    raise InvalidNamespaceError(
                        f"Invalid namespace label '{label}' found in {namespace}. Namespace "
                        f"labels must be strings, but got {type(label).__name__}."
                    )
                if "." in label:
                    raise InvalidNamespaceError(
                        f"Invalid namespace label '{label}' found in {namespace}. Namespace "
                        "labels cannot contain periods ('.')."
                    )
                if "\x00" in label:
                    raise InvalidNamespaceError(
                        f"Invalid namespace label '{label}' found in {namespace}. Namespace "
                        "labels cannot contain NUL bytes ('\\x00')."
                    )
                if not label:
                    raise InvalidNamespaceError(
                        f"Namespace labels cannot be empty strings. Got {label} in {namespace}"
                    )


def does_match(condition: MatchCondition, namespace: tuple[str, ...]) -> bool:
    """A list_namespaces prefix or suffix condition ('*' matches any label)."""
    path = condition.path
    if len(namespace) < len(path):
        return False
    if condition.match_type == "prefix":
        pairs = zip(namespace, path, strict=False)
    elif condition.match_type == "suffix":
        pairs = zip(reversed(namespace), reversed(path), strict=False)
    else:
        raise ValueError(f"Unsupported match type: {condition.match_type}")
    return all(p == "*" or k == p for k, p in pairs)


def literal_prefix(conditions: Sequence[MatchCondition] | None) -> tuple[str, ...]:
    """The labels before the first wildcard of the prefix condition (the index range read)."""
    for condition in conditions or ():
        if condition.match_type == "prefix":
            labels: list[str] = []
            for label in condition.path:
                if label == "*":
                    break
                labels.append(label)
            return tuple(labels)
    return ()


def under(namespace: tuple[str, ...], namespace_prefix: tuple[str, ...]) -> bool:
    """(A list as the prefix, as PostgresStore takes it, is the same tuple.)"""
    return namespace[: len(namespace_prefix)] == tuple(namespace_prefix)


@dataclass
class _Cursor:
    """One namespace's position in a search: the (updated_at, key) of the last index entry
    read (the next page starts after it), items read and not yet merged."""

    namespace: tuple[str, ...]
    score: Any = ""
    member: Any = ""
    done: bool = False
    buffer: list[SearchItem] = field(default_factory=list)


@dataclass
class StoreConfig:
    """``clock``: None (production) has the scripts read the server's clock, which every
    client shares; a test sets a virtual one (ms since the epoch), which then stamps the
    puts too (updated_at µs = ms * 1000)."""

    prefix: str
    ttl: TTLConfig | None = None
    clock: Callable[[], int] | None = None
    # the vectors' dimensions when the store has an index (semantic search), else None
    dims: int | None = None


# what each part of an item lives in (a StoreItemLostError names the key), by namespace_keys
_PART_KEY = {"value": 0, "created_at": 1, "updated_at": 2}


def _lost(config: StoreConfig, namespace: tuple[str, ...], key: str, what: Any) -> Exception:
    part = _text(what)
    redis_key = namespace_keys(config.prefix, namespace)[_PART_KEY[part]]
    return StoreItemLostError(namespace, key, part, redis_key)


def _put_calls(
    config: StoreConfig, op: PutOp, now: str, stamp: str, vectors: bytes, created: str = ""
) -> list[Call]:
    keys = namespace_keys(config.prefix, op.namespace)
    if op.value is None:
        return [("script", "store_put", keys, [now, op.key, "", stamp, "", "", ""])]
    ttl = op.ttl
    ttl_ms = "" if ttl is None else str(int(float(ttl) * 60_000))
    value = json.dumps(op.value, separators=(",", ":"), ensure_ascii=False)
    ahead: Call = (
        "command",
        "ZADD",
        [namespace_index_key(config.prefix), 0, encode_namespace(op.namespace)],
        (),
    )
    put: Call = ("script", "store_put", keys, [now, op.key, value, stamp, ttl_ms, vectors, created])
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
            first.append(("command", "ZRANGEBYLEX", [index, low, high], ()))
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
                    raise _lost(config, op.namespace, op.key, reply[1])
                results[i] = (
                    None
                    if not reply
                    else Item(
                        value=json.loads(reply[0]),
                        key=op.key,
                        namespace=op.namespace,
                        created_at=_moment(reply[1]),
                        updated_at=_moment(reply[2]),
                    )
                )
            elif kind == "search":
                assert isinstance(op, SearchOp)
                found = [decode_namespace(_text(m)) for m in reply]
                searches.append((i, op, [n for n in found if under(n, op.namespace_prefix)]))
            else:
                assert isinstance(op, ListNamespacesOp)
                listings.append((i, op, [decode_namespace(_text(m)) for m in reply]))
        for i, sop, namespaces in searches:
            query = embedding.queries.get(sop.query) if sop.query else None
            if query and config.dims is not None:
                results[i] = yield from _vector_search(config, sop, namespaces, now, query)
            else:
                results[i] = yield from _search(config, sop, namespaces, now)
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
                    "",
                )
                for n, op in enumerate(puts.values())
            ],
            now,
        )
    return results


# a put of _put_round: the op, its updated_at stamp ("": the server's clock), its vectors, its
# created_at ("": the stamp)
PutEntry = tuple[PutOp, str, bytes, str]


def _put_round(
    config: StoreConfig, entries: Sequence[PutEntry], now: str
) -> Generator[list[Call], list[Any], None]:
    """The puts in one round, in order; then a namespace that was empty before its put is
    written into the global index once more (a sweep may have removed it meanwhile)."""
    calls: list[Call] = []
    owners: list[str | None] = []  # per call: the namespace of a put script, else None
    for op, stamp, vectors, created in entries:
        for call in _put_calls(config, op, now, stamp, vectors, created):
            calls.append(call)
            put = call[0] == "script" and op.value is not None
            owners.append(encode_namespace(op.namespace) if put else None)
    replies = yield calls
    index = namespace_index_key(config.prefix)
    again: list[Call] = [
        ("command", "ZADD", [index, 0, owner], ())
        for owner, reply in zip(owners, replies, strict=True)
        if owner is not None and int(reply) == 1
    ]
    if again:
        yield again


def micros(moment: datetime) -> int:
    """A timestamp in µs since the epoch, exactly (the stores' stamps)."""
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    return (moment - _EPOCH) // timedelta(microseconds=1)


_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


def import_plans(
    config: StoreConfig, items: Sequence[Item], *, recopy: bool = False
) -> Generator[list[Call], list[Any], list[str]]:
    """What copying each item of another store takes (``migrate.py``), read in one round:
    "copy" (absent here, or part of it lost: a copy repairs it), "present" (the same value
    and created_at are here), "conflict" (another item of that namespace and key is here),
    or with ``recopy`` "replace" in place of "conflict"."""
    now = "" if config.clock is None else str(config.clock())
    replies = yield [
        ("script", "store_get", namespace_keys(config.prefix, item.namespace), [now, "0", item.key])
        for item in items
    ]
    plans = []
    for item, reply in zip(items, replies, strict=True):
        if not reply or isinstance(reply[0], int):
            plans.append("copy" if not reply else "replace")
        elif json.loads(reply[0]) == item.value and int(_text(reply[1])) == micros(item.created_at):
            plans.append("present")
        else:
            plans.append("replace" if recopy else "conflict")
    return plans


def import_outcome(plans: Sequence[str], *, dry_run: bool) -> list[str]:
    """The status of each item of an import once its plan ran (or, ``dry_run``, would run)."""
    done = {"copy": "copied", "replace": "replaced"}
    if dry_run:
        done = {"copy": "to copy", "replace": "to replace"}
    return [done.get(plan, plan) for plan in plans]


def run_import(
    config: StoreConfig,
    copies: Sequence[tuple[Item, bool]],
    embedding: Embedding | None = None,
    *,
    ttl_minutes: float | None = None,
) -> Generator[list[Call], list[Any], None]:
    """Copies of items of another store (``(item, whether one is here to replace)``), each
    keeping its value, created_at and updated_at: ``migrate.py``'s writes, in one round.

    An item's updated_at is its index score, kept above its namespace's newest: an item
    copied into a namespace that holds one as new or newer (a tie of the source's too) gets
    a stamp just above it, so the source's order holds."""
    embedding = embedding or Embedding()
    now = "" if config.clock is None else str(config.clock())
    entries: list[PutEntry] = []
    for item, replace in sorted(copies, key=lambda c: (c[0].namespace, micros(c[0].updated_at))):
        if replace:  # gone first, so that created_at is the source's (a put keeps one)
            entries.append((PutOp(item.namespace, item.key, None), "", b"", ""))
        put = PutOp(item.namespace, item.key, item.value, ttl=ttl_minutes)
        vectors = embedding.vectors.get((item.namespace, item.key), b"")
        entries.append((put, str(micros(item.updated_at)), vectors, str(micros(item.created_at))))
    yield from _put_round(config, entries, now)


def _page_calls(
    config: StoreConfig,
    cursors: Sequence[_Cursor],
    now: str,
    refresh: str,
    page: int,
    vectors: bool,
) -> list[Call]:
    """The next page of each cursor's namespace (store_page.lua), with the items' vectors
    when ``vectors``."""
    return [
        (
            "script",
            "store_page",
            namespace_keys(config.prefix, c.namespace),
            [now, refresh, c.score, c.member, page, *(["1", PAGE_BYTES] if vectors else ["", ""])],
        )
        for c in cursors
    ]


def _advance(config: StoreConfig, cursor: _Cursor, reply: Any, page: int) -> list[Any]:
    """The items of a page's reply, the cursor moved past them (done after a short page); an
    item that lost a key raises."""
    read = int(reply[0])
    if read < 0:
        raise _lost(config, cursor.namespace, _text(reply[1]), reply[2])
    if read:
        cursor.score, cursor.member = reply[1], reply[2]
    if read < page:
        cursor.done = True
    return list(reply[3:])


def _search(
    config: StoreConfig, op: SearchOp, namespaces: list[tuple[str, ...]], now: str
) -> Generator[list[Call], list[Any], list[SearchItem]]:
    """Items of the namespaces under the prefix, newest-updated first, merged from pages of
    each namespace's index; the filter is applied to the pages as they come."""
    if op.limit <= 0 or not namespaces:
        return []
    need = op.offset + op.limit
    page = max(PAGE_MIN, min(PAGE_MAX, need if not op.filter else need * 4))
    refresh = "1" if op.refresh_ttl else "0"
    cursors = [_Cursor(n) for n in namespaces]
    matched: list[SearchItem] = []
    # heap of (-updated µs, order, cursor index) over the head of each cursor's buffer
    while len(matched) < need:
        wanted = [c for c in cursors if not c.buffer and not c.done]
        if wanted:
            replies = yield _page_calls(config, wanted, now, refresh, page, vectors=False)
            for c, reply in zip(wanted, replies, strict=True):
                body = _advance(config, c, reply, page)
                for j in range(0, len(body), 4):
                    value = json.loads(body[j + 1])
                    if op.filter and not all(
                        compare_values(value.get(k), v) for k, v in op.filter.items()
                    ):
                        continue
                    c.buffer.append(
                        SearchItem(
                            namespace=c.namespace,
                            key=_text(body[j]),
                            value=value,
                            created_at=_moment(body[j + 2]),
                            updated_at=_moment(body[j + 3]),
                        )
                    )
        live = [c for c in cursors if c.buffer or not c.done]
        if not live:
            break
        if any(not c.buffer for c in live):
            continue  # a namespace still to read before the merge can go on
        # the newest head; a tie goes to the namespace that sorts first
        best = max(
            live, key=lambda c: (c.buffer[0].updated_at, [-ord(ch) for ch in ".".join(c.namespace)])
        )
        matched.append(best.buffer.pop(0))
    return matched[op.offset : op.offset + op.limit]


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
    page = max(PAGE_MIN, min(PAGE_MAX, PAGE_BYTES // (4 * config.dims)))
    # namespaces a round: from a full round of full pages, then as many as the bytes the
    # last round brought say fit (at most four times as many: small namespaces of small
    # vectors go a few rounds, not one per PAGE_BYTES)
    per_round = max(1, VECTOR_ROUND_BYTES // PAGE_BYTES)
    cursors = [_Cursor(n) for n in namespaces]
    # (order key, (namespace, key, value JSON or parsed, created µs, updated µs, score))
    kept: list[tuple[tuple[Any, ...], tuple[Any, ...]]] = []
    while True:
        wanted = [c for c in cursors if not c.done][:per_round]
        if not wanted:
            break
        # (read without renewing: a query reads every item under the prefix, and only those
        # it returns are renewed, below, as PostgresStore does)
        replies = yield _page_calls(config, wanted, now, "0", page, vectors=True)
        found: list[tuple[Any, ...]] = []
        blobs: list[bytes] = []
        held = 0
        for c, reply in zip(wanted, replies, strict=True):
            body = _advance(config, c, reply, page)
            held += sum(len(body[j + 1]) + len(body[j + 4]) for j in range(0, len(body), 5))
            for j in range(0, len(body), 5):
                value: Any = body[j + 1]
                if op.filter:
                    value = json.loads(value)
                    if not all(compare_values(value.get(k), v) for k, v in op.filter.items()):
                        continue
                updated = int(float(_text(body[j + 3])))
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
                key=_text(key),
                value=json.loads(value) if isinstance(value, (bytes, str)) else value,
                created_at=_moment(created),
                updated_at=_moment(updated),
                score=score,
            )
        )
    return out


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
        yield [("command", "ZREM", [index, *map(encode_namespace, empty)], ())]
        # a put may have filled one between its count and the ZREM (its own ZADD came
        # before): counted again after the ZREM, such a namespace goes back in the index
        again = yield [
            ("script", "store_alive", namespace_keys(config.prefix, n), [now]) for n in empty
        ]
        filled = [n for n, reply in zip(empty, again, strict=True) if int(reply[0]) > 0]
        if filled:
            members = [m for n in filled for m in (0, encode_namespace(n))]
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
    namespaces = [decode_namespace(_text(m)) for m in names]
    now = "" if config.clock is None else str(config.clock())
    _, purged = yield from _alive(config, namespaces, now)
    return purged, _text(names[-1]) if len(names) == count else ""


def _list_namespaces(
    config: StoreConfig, op: ListNamespacesOp, namespaces: list[tuple[str, ...]], now: str
) -> Generator[list[Call], list[Any], list[tuple[str, ...]]]:
    """The live namespaces the index names (the empty ones are swept from it)."""
    namespaces, _ = yield from _alive(config, namespaces, now)
    if op.match_conditions:
        namespaces = [n for n in namespaces if all(does_match(c, n) for c in op.match_conditions)]
    if op.max_depth is not None:
        namespaces = sorted({n[: op.max_depth] for n in namespaces})
    else:
        namespaces = sorted(namespaces)
    return namespaces[op.offset : op.offset + op.limit]
