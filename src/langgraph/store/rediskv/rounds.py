"""What every round of the store's operations shares: the calls a round is made of, the
replies' errors, the store's settings (``StoreConfig``), the error of an item that lost a
key, and the stamps read back as datetimes."""

from __future__ import annotations

from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from langgraph.store.base import Result, TTLConfig

from langgraph.checkpoint.rediskv.errors import StoreItemLostError

from .keys import namespace_keys, text

# A call: ("script", name, keys, args), ("command", name, args, ()), or ("attempt", name, args,
# ()): a command whose error is its reply (errors_raised)
Call = tuple[str, str, Sequence[Any], Sequence[Any]]
Rounds = Generator[list[Call], list[Any], list[Result]]


def errors_raised(calls: Sequence[Call], replies: Sequence[Any]) -> list[Any]:
    """A round's replies, its first error raised, but for an "attempt" call's, which is its
    reply (the drivers run a round with ``raise_on_error=False``)."""
    for call, reply in zip(calls, replies, strict=True):
        if isinstance(reply, Exception) and call[0] != "attempt":
            raise reply
    return list(replies)


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
    # whether the store uses the server's vector search (its FT index exists: the puts write
    # the vectors' documents, a query search asks the index); set by the store's start-up
    server_search: bool = False


# what each part of an item lives in (a StoreItemLostError names the key), by namespace_keys
_PART_KEY = {"value": 0, "created_at": 1, "updated_at": 2}


def item_lost(config: StoreConfig, namespace: tuple[str, ...], key: str, what: Any) -> Exception:
    """The error of an item whose ``what`` part ("value", "created_at" or "updated_at", as a
    script replies it) is gone: it names the Redis key that lost it."""
    part = text(what)
    redis_key = namespace_keys(config.prefix, namespace)[_PART_KEY[part]]
    return StoreItemLostError(namespace, key, part, redis_key)


def moment(us: Any) -> datetime:
    """A stamp in µs since the epoch (as the scripts reply it) as an aware UTC datetime."""
    return datetime.fromtimestamp(int(float(text(us))) / 1_000_000, tz=timezone.utc)
