"""The store's key layout (``RedisStore`` / ``AsyncRedisStore``), under a prefix ``S``.

A namespace ``("users", "u1", "memories")`` is encoded ``users.u1.memories`` (LangGraph forbids
periods and NUL bytes in labels, so the encoding is one-to-one). Each namespace ``N`` owns six
keys sharing the hash tag ``{S:N}``, so every per-namespace script runs on one slot of a cluster:

    S:{S:N}:h   HASH  item key -> value (JSON)
    S:{S:N}:m   HASH  item key -> created_at (µs since the epoch)
    S:{S:N}:z   ZSET  item key scored by updated_at (µs): the namespace's index, newest last
    S:{S:N}:x   ZSET  item key scored by its expiry (ms since the epoch); items with a TTL only
    S:{S:N}:t   HASH  item key -> the item's TTL (ms), read by refresh_ttl
    S:{S:N}:v   HASH  item key -> the item's vectors (semantic search: float32s end to end,
                      see vectors.py); items embedded only

and one global key (another slot on a cluster):

    S:store:ns  ZSET  every encoded namespace that may hold items, all scored 0, read with
                      ZRANGEBYLEX for a prefix (never KEYS or SCAN)

The global index is written ahead: a put adds its namespace before its script runs (and once
more after, when the script reports that the namespace was empty before), so it is a superset
of the namespaces holding items. It is swept lazily: list_namespaces counts the live items of
each namespace it reads (``store_alive``) and removes the empty ones.
"""

from __future__ import annotations

KEY_SUFFIXES = ("h", "m", "z", "x", "t", "v")


def encode_namespace(namespace: tuple[str, ...]) -> str:
    """``("a", "b")`` -> ``"a.b"``."""
    return ".".join(namespace)


def decode_namespace(encoded: str) -> tuple[str, ...]:
    """``"a.b"`` -> ``("a", "b")``; ``""`` -> ``()`` (a label is never empty: ``""`` is the
    namespace ``()``, which ``batch`` takes as ``InMemoryStore`` does)."""
    return tuple(encoded.split(".")) if encoded else ()


def namespace_keys(prefix: str, namespace: tuple[str, ...]) -> list[str]:
    """The six keys of ``namespace``, in the order the store scripts take them."""
    tag = f"{prefix}:{{{prefix}:{encode_namespace(namespace)}}}"
    return [f"{tag}:{suffix}" for suffix in KEY_SUFFIXES]


def namespace_index_key(prefix: str) -> str:
    """The global namespace index."""
    return f"{prefix}:store:ns"


def prefix_range(namespace_prefix: tuple[str, ...]) -> tuple[str, str]:
    """ZRANGEBYLEX bounds covering the encodings of ``namespace_prefix`` and the namespaces
    under it (``"a"`` and ``"a." ...``, not ``"ab"``): ``[a`` to ``(a/`` ('/' follows '.')."""
    if not namespace_prefix:
        return "-", "+"
    encoded = encode_namespace(namespace_prefix)
    return f"[{encoded}", f"({encoded}/"
