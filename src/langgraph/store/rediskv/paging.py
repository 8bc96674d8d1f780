"""The pages of a namespace's index that the searches read (store_page.lua): a cursor per
namespace, the calls of a page, the items of its reply."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from langgraph.store.base import SearchItem

from .keys import namespace_keys, text
from .rounds import Call, StoreConfig, item_lost

PAGE_MIN = 16
PAGE_MAX = 512


def page_size(wanted: int) -> int:
    """The items a page asks for: ``wanted`` within PAGE_MIN and PAGE_MAX (read here, so that
    one setting bounds the plain search's pages and the query search's)."""
    return max(PAGE_MIN, min(PAGE_MAX, wanted))


@dataclass
class Cursor:
    """One namespace's position in a search: the (updated_at, key) of the last index entry
    read (the next page starts after it), items read and not yet merged."""

    namespace: tuple[str, ...]
    score: Any = ""
    member: Any = ""
    done: bool = False
    buffer: list[SearchItem] = field(default_factory=list)


def page_calls(
    config: StoreConfig,
    cursors: Sequence[Cursor],
    now: str,
    refresh: str,
    page: int,
    vector_bytes: int | None,
) -> list[Call]:
    """The next page of each cursor's namespace (store_page.lua); with ``vector_bytes``, with
    the items' vectors, the page ending once it holds that many bytes of values and vectors."""
    return [
        (
            "script",
            "store_page",
            namespace_keys(config.prefix, c.namespace),
            [
                now,
                refresh,
                c.score,
                c.member,
                page,
                *(["", ""] if vector_bytes is None else ["1", vector_bytes]),
            ],
        )
        for c in cursors
    ]


def advance(config: StoreConfig, cursor: Cursor, reply: Any, page: int) -> list[Any]:
    """The items of a page's reply, the cursor moved past them (done after a short page); an
    item that lost a key raises."""
    read = int(reply[0])
    if read < 0:
        raise item_lost(config, cursor.namespace, text(reply[1]), reply[2])
    if read:
        cursor.score, cursor.member = reply[1], reply[2]
    if read < page:
        cursor.done = True
    return list(reply[3:])
