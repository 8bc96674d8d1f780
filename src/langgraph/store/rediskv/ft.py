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
from typing import Any, Literal

from .keys import namespace_tag, vector_doc_prefix, vector_index_name

VectorSearch = Literal["auto", "server", "client"]
VECTOR_SEARCH_MODES = ("auto", "server", "client")


def check_mode(mode: Any) -> VectorSearch:
    """``vector_search=`` of a store: "auto", "server" or "client" (a ValueError otherwise)."""
    if mode not in VECTOR_SEARCH_MODES:
        raise ValueError(f"vector_search must be 'auto', 'server' or 'client', not {mode!r}")
    return mode  # type: ignore[no-any-return]


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


def search_ids(reply: Any) -> list[bytes]:
    """The document keys of an FT.SEARCH NOCONTENT reply: RESP2 ``[total, id, id, ...]``, or
    RESP3 ``{"results": [{"id": ...}, ...], ...}``."""
    if isinstance(reply, dict):
        results = reply.get(b"results", reply.get("results")) or []
        out = []
        for result in results:
            doc = result.get(b"id", result.get("id")) if isinstance(result, dict) else result
            out.append(doc if isinstance(doc, bytes) else str(doc).encode())
        return out
    return [doc if isinstance(doc, bytes) else str(doc).encode() for doc in list(reply)[1:]]
