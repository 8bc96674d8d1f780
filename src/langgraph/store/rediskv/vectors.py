"""Semantic search, sans I/O: which texts of a put are embedded (as ``InMemoryStore``), the
vectors packed as float32 bytes, and the exact cosine of a query against them.

An item's vectors are one field of its namespace's ``v`` hash: its vectors (one per embedded
text) end to end, ``dims`` little-endian float32 each. A search scores an item by its best
vector (max pooling, as ``InMemoryStore``), so the paths the texts came from are not kept.
"""

from __future__ import annotations

import functools
import sys
from array import array
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from importlib import util
from typing import Any

from langchain_core.embeddings import Embeddings
from langgraph.store.base import (
    IndexConfig,
    Op,
    PutOp,
    SearchOp,
    ensure_embeddings,
    get_text_at_path,
    tokenize_path,
)


@dataclass
class VectorIndex:
    """The store's ``index=``, checked: ``fields`` tokenized as ``InMemoryStore`` does."""

    dims: int
    embeddings: Embeddings
    fields: list[tuple[str, str | list[str]]]


def vector_index(index: IndexConfig | dict[str, Any] | None) -> VectorIndex | None:
    """``index=`` of a store, or None; a clear ValueError for a config that cannot work."""
    if index is None:
        return None
    if not isinstance(index, dict):
        raise ValueError(f"index must be a dict with 'dims' and 'embed', not {type(index)!r}")
    unknown = set(index) - {"dims", "embed", "fields"}
    if unknown:
        raise ValueError(f"unknown index settings: {sorted(unknown)}")
    dims = index.get("dims")
    if isinstance(dims, bool) or not isinstance(dims, int) or dims <= 0:
        raise ValueError(f"index 'dims' must be a positive int, not {dims!r}")
    if index.get("embed") is None:
        raise ValueError("index has no 'embed' (an Embeddings object or an embedding function)")
    fields = index.get("fields") or ["$"]
    if isinstance(fields, str) or not all(isinstance(f, str) for f in fields):
        raise ValueError(f"index 'fields' must be a list of paths (str), not {fields!r}")
    return VectorIndex(
        dims=dims,
        embeddings=ensure_embeddings(index["embed"]),
        fields=[(f, tokenize_path(f)) if f != "$" else (f, f) for f in fields],
    )


def put_texts(index: VectorIndex, op: PutOp) -> list[str]:
    """The texts of a put to embed, in order: its ``index`` paths (None: the store's fields,
    False: none), each path's texts (a path may reach several)."""
    if op.value is None or op.index is False:
        return []
    paths = index.fields if op.index is None else [(p, tokenize_path(p)) for p in op.index]
    return [text for _, tokens in paths for text in get_text_at_path(op.value, tokens)]


@dataclass
class Embedding:
    """What a batch embeds: the texts of its puts (by item, the last put of an item wins, as
    in ``run_batch``), and its queries. ``vectors`` and ``queries`` are filled by the store's
    driver (sync or async embedder), then handed to ``run_batch``."""

    texts: dict[tuple[tuple[str, ...], str], list[str]] = field(default_factory=dict)
    queries: dict[str, list[float]] = field(default_factory=dict)
    vectors: dict[tuple[tuple[str, ...], str], bytes] = field(default_factory=dict)

    def unique_texts(self) -> list[str]:
        return list(dict.fromkeys(t for texts in self.texts.values() for t in texts))

    def fill(
        self,
        index: VectorIndex,
        texts: Sequence[str],
        documents: Sequence[Sequence[float]],
        queries: Sequence[Sequence[float]],
    ) -> None:
        """The embedder's answers in: ``documents`` for ``texts``, ``queries`` for the
        queries in order; each checked against ``dims`` (a ValueError before anything is
        written)."""
        if len(documents) != len(texts):
            raise ValueError(
                f"the embedder returned {len(documents)} vectors for {len(texts)} texts"
            )
        by_text = {t: pack(v, index.dims, t) for t, v in zip(texts, documents, strict=True)}
        self.vectors = {
            item: dims_header(index.dims) + b"".join(by_text[t] for t in item_texts)
            for item, item_texts in self.texts.items()
        }
        for query, vector in zip(list(self.queries), queries, strict=True):
            pack(vector, index.dims, query)  # checks its length
            self.queries[query] = [float(x) for x in vector]


def plan(index: VectorIndex | None, ops: Iterable[Op]) -> Embedding:
    """The texts and queries a batch embeds (nothing without an index)."""
    embedding = Embedding()
    if index is None:
        return embedding
    for op in ops:
        if isinstance(op, PutOp):
            embedding.texts[(op.namespace, op.key)] = put_texts(index, op)
        elif isinstance(op, SearchOp) and op.query:
            embedding.queries[op.query] = []
    embedding.texts = {item: texts for item, texts in embedding.texts.items() if texts}
    return embedding


def embed(index: VectorIndex | None, embedding: Embedding) -> Embedding:
    """Embed with the sync embedder (``RedisStore``)."""
    if index is None or not (embedding.texts or embedding.queries):
        return embedding
    texts = embedding.unique_texts()
    documents = index.embeddings.embed_documents(texts) if texts else []
    queries = [index.embeddings.embed_query(q) for q in embedding.queries]
    embedding.fill(index, texts, documents, queries)
    return embedding


async def aembed(index: VectorIndex | None, embedding: Embedding) -> Embedding:
    """Embed with the async embedder (``AsyncRedisStore``)."""
    if index is None or not (embedding.texts or embedding.queries):
        return embedding
    texts = embedding.unique_texts()
    documents = await index.embeddings.aembed_documents(texts) if texts else []
    queries = [await index.embeddings.aembed_query(q) for q in embedding.queries]
    embedding.fill(index, texts, documents, queries)
    return embedding


def pack(vector: Sequence[float], dims: int, text: str) -> bytes:
    """One vector as ``dims`` little-endian float32s."""
    if len(vector) != dims:
        shown = text if len(text) <= 40 else text[:37] + "..."
        raise ValueError(
            f"the embedder returned a vector of {len(vector)} dimensions for {shown!r}; "
            f"the store's index has dims={dims}"
        )
    # (+ 0.0: a -0.0 is stored 0.0, so that a zero vector has one form, which the scripts
    # tell apart for the server's vector search; no cosine changes)
    packed = array("f", (float(x) + 0.0 for x in vector))
    if sys.byteorder != "little":
        packed.byteswap()
    return packed.tobytes()


def dims_header(dims: int) -> bytes:
    """What an item's vectors start with: their ``dims``, 4 bytes little-endian, so that a
    store opened with another ``dims`` is refused (one that divides the stored one would
    read each vector as several short ones)."""
    return dims.to_bytes(4, "little")


def vector_bytes(blob: bytes, dims: int) -> bytes:
    """The float32s of an item's stored vectors (see :class:`Embedding`), after a check that
    they are of ``dims``: a ValueError naming both otherwise."""
    stored = int.from_bytes(blob[:4], "little") if len(blob) >= 4 else None
    if stored != dims or (len(blob) - 4) % (4 * dims):
        raise ValueError(
            f"stored vectors of dims={stored} ({len(blob)} bytes) do not fit the store's index, "
            f"dims={dims} (written by a store with another dims? re-put the items)"
        )
    return blob[4:]


def unpack(raw: bytes, dims: int) -> list[list[float]]:
    """Vectors of ``dims`` from their float32 bytes (what :func:`vector_bytes` checked)."""
    values = array("f")
    values.frombytes(raw)
    if sys.byteorder != "little":
        values.byteswap()
    flat = values.tolist()
    return [flat[i : i + dims] for i in range(0, len(flat), dims)]


@functools.cache
def _has_numpy() -> bool:
    # the test InMemoryStore makes, so that both compute the same scores the same way
    return util.find_spec("numpy") is not None


def item_scores(query: Sequence[float], blobs: Sequence[bytes], dims: int) -> list[float | None]:
    """Each item's score: the best cosine of ``query`` with its vectors (``blobs``, see
    :func:`pack`), None for an item without vectors (see :func:`vector_scores`)."""
    return [max(scores) if scores else None for scores in vector_scores(query, blobs, dims)]


def vector_scores(query: Sequence[float], blobs: Sequence[bytes], dims: int) -> list[list[float]]:
    """The cosine of ``query`` with each vector of each item (``blobs``, see :func:`pack`), in
    the vectors' order; [] for an item without vectors. Computed as ``InMemoryStore`` does
    (numpy when installed, else pure Python; 0 for a zero vector), in float64 from the
    stored float32s, so that the same vectors score the same (the rows' norms summed by
    einsum, some 40 times faster than ``linalg.norm`` here, exact for integer vectors and
    within 1e-15 otherwise)."""
    rows = [vector_bytes(blob, dims) if blob else b"" for blob in blobs]
    counts = [len(r) // (4 * dims) for r in rows]
    if not any(counts):
        return [[] for _ in blobs]
    if _has_numpy():
        import numpy as np

        x = np.array(query)
        y = np.frombuffer(b"".join(rows), dtype="<f4").reshape(-1, dims).astype(np.float64)
        x_norm = np.linalg.norm(x)
        y_norm = np.sqrt(np.einsum("ij,ij->i", y, y))
        mask = (y_norm != 0) & (x_norm != 0)  # (a zero query scores 0, as without numpy)
        scores = np.zeros_like(y_norm)
        scores[mask] = np.dot(y[mask], x) / (y_norm[mask] * x_norm)
        flat: list[float] = scores.tolist()
    else:
        flat = []
        norm1 = sum(a * a for a in query) ** 0.5
        for raw in rows:
            for row in unpack(raw, dims):
                dot = sum(a * b for a, b in zip(query, row, strict=False))
                norm2 = sum(a * a for a in row) ** 0.5
                flat.append(dot / (norm1 * norm2) if norm1 > 0 and norm2 > 0 else 0.0)
    out: list[list[float]] = []
    at = 0
    for count in counts:
        out.append(flat[at : at + count])
        at += count
    return out
