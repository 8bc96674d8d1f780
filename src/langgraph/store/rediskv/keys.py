"""The store's key layout (``RedisStore`` / ``AsyncRedisStore``), under a prefix ``S``.

A namespace ``("users", "u1", "memories")`` is encoded ``users.u1.memories`` (LangGraph forbids
periods and NUL bytes in labels, so the encoding is one-to-one). Each namespace ``N`` owns seven
keys sharing the hash tag ``{S:N}``, so every per-namespace script runs on one slot of a cluster:

    S:{S:N}:h   HASH  item key -> value (JSON)
    S:{S:N}:m   HASH  item key -> created_at (µs since the epoch)
    S:{S:N}:z   ZSET  item key scored by updated_at (µs): the namespace's index, newest last
    S:{S:N}:x   ZSET  item key scored by its expiry (ms since the epoch); items with a TTL only
    S:{S:N}:t   HASH  item key -> the item's TTL (ms), read by refresh_ttl
    S:{S:N}:v   HASH  item key -> the item's vectors (semantic search: float32s end to end,
                      see vectors.py); items embedded only
    S:{S:N}:d   SET   the item keys whose vectors have documents (below): the server's vector
                      search only, so that a script touches a document key only where one
                      was written (never on a cluster, where the search is the client's)

and one global key (another slot on a cluster):

    S:store:ns  ZSET  every namespace that may hold items (its labels joined by NUL:
                      index_member, ordered as the tuples are), all scored 0, read with
                      ZRANGEBYLEX for a prefix (never KEYS or SCAN)

When the server has a vector search (FT.*: RediSearch, Redis 8's Query Engine, valkey-search)
and the store uses it (``vector_search=``), each of an item's vectors is also a document of
its own, in the namespace's slot, which the index ``S:store:vec`` (FT.CREATE ... PREFIX 1
``S:sv:``; an index name, not a key) covers:

    S:sv:L:{S:N}:i:K  HASH  the item K's i-th vector (i from 0): ``vec`` (float32s) and ``ns``
                      (TAG: the namespace's tags, :func:`namespace_tags`); a zero vector has
                      no ``vec`` (a cosine of it is 0 by definition, not the server's NaN)
                      and its tags start with ``z``. L is the byte length of N, so that the
                      key names its namespace and item whatever they hold (N may hold
                      ``}:``). Written, replaced and deleted with the item by the scripts
                      (lua/include/store_purge.lua ``store_doc_key`` builds the same names):
                      the one kind of key a store script touches that its KEYS do not name
                      (the same slot; a standalone server: no slot moves).

The global index is written ahead: a put adds its namespace before its script runs (and once
more after, when the script reports that the namespace was empty before), so it is a superset
of the namespaces holding items. It is swept lazily: list_namespaces counts the live items of
each namespace it reads (``store_alive``) and removes the empty ones.
"""

from __future__ import annotations

import hashlib
from typing import Any

KEY_SUFFIXES = ("h", "m", "z", "x", "t", "v", "d")


def text(value: Any) -> str:
    """A reply's bytes (from a client without ``decode_responses``) or text as ``str``;
    anything else (a number) as ``str(value)``."""
    return value.decode() if isinstance(value, bytes) else str(value)


def encode_namespace(namespace: tuple[str, ...]) -> str:
    """``("a", "b")`` -> ``"a.b"``."""
    return ".".join(namespace)


def decode_namespace(encoded: str) -> tuple[str, ...]:
    """``"a.b"`` -> ``("a", "b")``; ``""`` -> ``()`` (a label is never empty: ``""`` is the
    namespace ``()``, which ``batch`` takes as ``InMemoryStore`` does)."""
    return tuple(encoded.split(".")) if encoded else ()


def namespace_keys(prefix: str, namespace: tuple[str, ...]) -> list[str]:
    """The seven keys of ``namespace``, in the order the store scripts take them."""
    tag = f"{prefix}:{{{prefix}:{encode_namespace(namespace)}}}"
    return [f"{tag}:{suffix}" for suffix in KEY_SUFFIXES]


def namespace_index_key(prefix: str) -> str:
    """The global namespace index."""
    return f"{prefix}:store:ns"


def index_member(namespace: tuple[str, ...]) -> str:
    """A namespace as a member of the namespace index: its labels joined by NUL, which
    LangGraph forbids in a label, so that the index's byte order is the order of the tuples
    (a label sorts before its extensions: ``("a", "b")`` before ``("a-b",)``, where ``a.b``
    would sort after ``a-b``): a listing reads its page of the index, not all of it."""
    return "\x00".join(namespace)


def index_namespace(member: str) -> tuple[str, ...]:
    """The namespace of an index member (``""``: ``()``)."""
    return tuple(member.split("\x00")) if member else ()


def prefix_range(namespace_prefix: tuple[str, ...]) -> tuple[str, str]:
    """ZRANGEBYLEX bounds of the index members of ``namespace_prefix`` and the namespaces
    under it (``a`` and ``a NUL ...``, not ``ab``): ``[a`` to ``(a\x01``."""
    if not namespace_prefix:
        return "-", "+"
    member = index_member(namespace_prefix)
    return f"[{member}", f"({member}\x01"


def vector_index_name(prefix: str) -> str:
    """The server's vector index (FT.CREATE) over the prefix's vector documents."""
    return f"{prefix}:store:vec"


def vector_doc_prefix(prefix: str) -> str:
    """What every vector document's key starts with (the index's PREFIX)."""
    return f"{prefix}:sv:"


def vector_doc_key(prefix: str, namespace: tuple[str, ...], key: str, i: int) -> str:
    """The document of the ``i``-th vector of item ``key`` (see the module's docstring)."""
    encoded = encode_namespace(namespace)
    length = len(encoded.encode())
    return f"{vector_doc_prefix(prefix)}{length}:{{{prefix}:{encoded}}}:{i}:{key}"


def parse_vector_doc_key(prefix: str, doc: bytes | str) -> tuple[tuple[str, ...], str, int]:
    """(namespace, item key, i) of a vector document's key; ValueError for another key."""
    raw = doc.encode() if isinstance(doc, str) else doc
    head = vector_doc_prefix(prefix).encode()
    if not raw.startswith(head):
        raise ValueError(f"not a vector document of prefix {prefix!r}: {raw!r}")
    length, _, rest = raw[len(head) :].partition(b":")
    tag = f"{{{prefix}:".encode()
    n = int(length)
    if not rest.startswith(tag) or rest[len(tag) + n : len(tag) + n + 2] != b"}:":
        raise ValueError(f"not a vector document of prefix {prefix!r}: {raw!r}")
    encoded = rest[len(tag) : len(tag) + n].decode()
    i, _, key = rest[len(tag) + n + 2 :].partition(b":")
    return decode_namespace(encoded), key.decode(), int(i)


def namespace_tag(namespace_prefix: tuple[str, ...]) -> str:
    """The TAG value of the documents under ``namespace_prefix`` (``()``: every one): 16 hex
    digits of its encoding's SHA-1, so that no label needs escaping in a query (a collision
    only costs a search candidates it drops: it checks each one's namespace)."""
    return hashlib.sha1(encode_namespace(namespace_prefix).encode()).hexdigest()[:16]


def namespace_tags(namespace: tuple[str, ...]) -> str:
    """The ``ns`` TAG field of the namespace's documents: the tags of the namespace and of
    each of its prefixes, ``()`` included, comma-separated (TAG's separator)."""
    return ",".join(namespace_tag(namespace[:i]) for i in range(len(namespace) + 1))
