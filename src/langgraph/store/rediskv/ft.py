"""The server's vector search (``FT.*``: RediSearch on Redis Stack, Redis 8's Query Engine,
valkey-search), sans I/O: the index the store creates, the queries it sends, the replies it
reads. Only what valkey-search's documented subset has: ``FT.CREATE ... ON HASH PREFIX``
with a ``VECTOR FLAT`` field and a ``TAG`` field, ``FT.SEARCH`` with a KNN query whose filter
is one tag, ``PARAMS``, ``NOCONTENT``, ``LIMIT`` and ``DIALECT 2``, and ``FT.INFO``.

The index is FLAT (exact, brute force), not HNSW (approximate): the server picks the
candidates, and the store ranks them by the cosine it computes itself (as ``InMemoryStore``),
so the answer is the exact one (docs/store.md, Semantic search).
"""

from __future__ import annotations

import itertools
from collections.abc import Generator
from typing import Any, Literal

from .keys import namespace_index_key, namespace_tag, vector_doc_prefix, vector_index_name

VectorSearch = Literal["auto", "server", "client"]
VECTOR_SEARCH_MODES = ("auto", "server", "client")


def check_mode(mode: Any) -> VectorSearch:
    """``vector_search=`` of a store: "auto", "server" or "client" (a ValueError otherwise)."""
    if mode not in VECTOR_SEARCH_MODES:
        raise ValueError(f"vector_search must be 'auto', 'server' or 'client', not {mode!r}")
    return mode  # type: ignore[no-any-return]


Outcome = Literal["server", "none", "unindexed"]


def start_up(prefix: str, dims: int) -> Generator[list[Any], Any, tuple[Outcome, str]]:
    """Which vector search a store on ``prefix`` uses, sans I/O: yields one command at a time
    and receives its reply, or the ResponseError it raised. Returns ("server", ""): the index
    exists (of ``dims``: another is a ValueError) or was made now; ("none", why): the server
    has no vector search (or refuses FT.CREATE); ("unindexed", why): the prefix already holds
    items but no index, so their vectors have no documents: the server's search would miss
    them."""
    name = vector_index_name(prefix)
    info = yield ["FT.INFO", name]
    if isinstance(info, Exception):
        if create_error(str(info)) == "absent":
            return "none", str(info)
        namespaces = yield ["ZCARD", namespace_index_key(prefix)]
        if isinstance(namespaces, Exception):
            raise namespaces
        if int(namespaces) > 0:
            return "unindexed", (
                f"the prefix {prefix!r} holds items written without the server's vector index "
                f"(by the client path or an earlier release): re-put them under a new prefix, "
                f"or keep vector_search='client'"
            )
        created = yield create_index_args(prefix, dims)
        if not isinstance(created, Exception):
            return "server", ""
        if create_error(str(created)) != "exists":
            return "none", str(created)
        info = yield ["FT.INFO", name]  # (made meanwhile by another store)
        if isinstance(info, Exception):
            raise info
    found = index_dims(info)
    if found is not None and found != dims:
        raise ValueError(
            f"the server's vector index {name!r} has dims={found}; this store's index has "
            f"dims={dims} (a prefix holds vectors of one dims)"
        )
    return "server", ""


def create_index_args(prefix: str, dims: int) -> list[Any]:
    """FT.CREATE of the prefix's vector index: a FLAT COSINE vector ``vec`` and a TAG ``ns``
    over the hashes whose key starts with the prefix's document prefix."""
    return [
        "FT.CREATE", vector_index_name(prefix), "ON", "HASH",
        "PREFIX", 1, vector_doc_prefix(prefix),
        "SCHEMA",
        "vec", "VECTOR", "FLAT", 6, "TYPE", "FLOAT32", "DIM", dims, "DISTANCE_METRIC", "COSINE",
        "ns", "TAG",
    ]  # fmt: skip


def create_error(message: str) -> Literal["exists", "absent", "other"]:
    """What an FT.CREATE error says: the index exists already (made by an earlier start),
    the server has no FT.CREATE, or something else (no vector support, no permission...)."""
    text = message.lower()
    if "already exists" in text:
        return "exists"
    if "unknown command" in text:
        return "absent"
    return "other"


def index_dims(info: Any) -> int | None:
    """The DIM of the vector field in an FT.INFO reply (RESP2 or RESP3, RediSearch or
    valkey-search: the first ``dim`` name followed by an integer), None if none is found."""
    flat: list[Any] = []

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            for key, value in node.items():
                flat.append(key)
                walk(value)
        elif isinstance(node, (list, tuple)):
            for value in node:
                walk(value)
        else:
            flat.append(node)

    walk(info)
    for name, value in itertools.pairwise(flat):
        text = name.decode(errors="replace") if isinstance(name, bytes) else str(name)
        if text.lower() in ("dim", "dimensions"):
            try:
                return int(value)
            except (TypeError, ValueError):
                continue
    return None


def knn_args(prefix: str, namespace_prefix: tuple[str, ...], query: bytes, k: int) -> list[Any]:
    """FT.SEARCH of the ``k`` vectors nearest ``query`` (float32 bytes) under the prefix,
    their document keys only."""
    tag = namespace_tag(namespace_prefix)
    return [
        "FT.SEARCH", vector_index_name(prefix), f"@ns:{{{tag}}}=>[KNN {k} @vec $q]",
        "PARAMS", 2, "q", query, "NOCONTENT", "LIMIT", 0, k, "DIALECT", 2,
    ]  # fmt: skip


def zero_args(prefix: str, namespace_prefix: tuple[str, ...], count: int) -> list[Any]:
    """FT.SEARCH of up to ``count`` documents of zero vectors under the prefix (no ``vec``:
    the KNN does not see them)."""
    tag = namespace_tag(namespace_prefix)
    return [
        "FT.SEARCH", vector_index_name(prefix), f"@ns:{{z{tag}}}",
        "NOCONTENT", "LIMIT", 0, count, "DIALECT", 2,
    ]  # fmt: skip


def search_ids(reply: Any) -> list[bytes] | None:
    """The document keys of an FT.SEARCH NOCONTENT reply: RESP2 ``[total, id, id, ...]``, or
    RESP3 ``{"results": [{"id": ...}, ...], ...}``; None when it is not a whole answer: an
    error (the call's reply is the error: a LIMIT past MAXSEARCHRESULTS...), a warning (a
    query that timed out returns what it found so far: RESP3 says so), a result without an
    id. The caller then searches on the client (never takes part of an answer for all).

    A limit: over RESP2 a timeout shows only as an error. RediSearch's default policy,
    ``ON_TIMEOUT RETURN``, sends RESP2 the ids found so far with nothing to tell them from a
    whole answer (seen on Redis Stack 7.4, RediSearch 2.10: ``[0]``, ``[99, <99 ids>]`` for a
    K=10,000 KNN; the total is the count sent), and FT.SEARCH takes no policy of its own
    (``ON_TIMEOUT`` is a module setting: ``Unknown argument``). ``TIMEOUT 0`` (no limit) is
    RediSearch's only, valkey-search takes 1 to 60,000 ms. So a store whose client speaks RESP2
    needs the server's ``ON_TIMEOUT FAIL`` (the timeout is then an error: the client path
    answers), or RESP3 (redis-py 8's default), or ``vector_search="client"``
    (docs/store.md, Semantic search)."""
    if isinstance(reply, Exception):
        return None
    if isinstance(reply, dict):
        if reply.get(b"warning", reply.get("warning")):
            return None
        results = reply.get(b"results", reply.get("results")) or []
        out = []
        for result in results:
            doc = result.get(b"id", result.get("id")) if isinstance(result, dict) else result
            if doc is None:
                return None
            out.append(doc if isinstance(doc, bytes) else str(doc).encode())
        return out
    if not isinstance(reply, (list, tuple)) or not reply:
        return None
    return [doc if isinstance(doc, bytes) else str(doc).encode() for doc in list(reply)[1:]]
