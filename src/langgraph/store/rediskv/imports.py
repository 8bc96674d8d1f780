"""Copying items of another store in with their own created_at and updated_at (what
``RedisStore.import_items`` and ``rediskv store migrate`` run), sans I/O: rounds of calls, as
:mod:`.core`. Each item is one ``store_import`` script, which decides there and then whether
it is new (written with the source's stamps), present (the same value JSON and created_at:
nothing written), a conflict (left as it is) or, asked to, replaced in one step."""

from __future__ import annotations

import json
from collections.abc import Generator, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Any

from langgraph.store.base import InvalidNamespaceError, Item, PutOp

from .keys import index_member, namespace_index_key, namespace_keys, namespace_tags, text
from .namespaces import check_namespaces
from .rounds import Call, StoreConfig
from .vectors import Embedding

_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
# a plan's status in a dry run
DRY_RUN = {"copy": "to copy", "replace": "to replace"}


def micros(moment: datetime) -> int:
    """A timestamp in µs since the epoch, exactly (the store's stamps); naive is UTC."""
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    return (moment - _EPOCH) // timedelta(microseconds=1)


def value_json(value: Any) -> str:
    """An item's value as a put stores it (the JSON an item here is compared by)."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def invalid_reason(item: Item) -> str | None:
    """Why ``item`` cannot be copied in (a namespace a put refuses, a value that is not JSON),
    or None."""
    namespace = tuple(item.namespace)
    if not namespace:
        return "an empty namespace"
    if namespace[0] == "langgraph":
        return "a namespace under 'langgraph' (reserved)"
    try:
        check_namespaces([PutOp(namespace, item.key, None)])
    except InvalidNamespaceError as exc:
        return str(exc)
    if not isinstance(item.key, str):
        return f"key {item.key!r} (not a string)"
    try:
        value_json(item.value)
    except (TypeError, ValueError) as exc:
        return f"a value that is not JSON ({exc})"
    return None


def import_plans(
    config: StoreConfig, items: Sequence[Item], *, recopy: bool = False
) -> Generator[list[Call], list[Any], list[str]]:
    """What copying each (valid) item takes, read in one round without writing: "copy" (not
    here), "present" (the same value JSON and created_at), "present, no vectors" (the same,
    without vectors: a store with an index gives it some), "conflict" (another item is
    here), or with ``recopy`` "replace" in place of "conflict". A dry run's answer, and with
    an index what to embed; ``store_import`` decides again as it writes."""
    now = "" if config.clock is None else str(config.clock())
    replies = yield [
        (
            "script",
            "store_get",
            namespace_keys(config.prefix, tuple(item.namespace)),
            [now, "0", item.key, "1"],
        )
        for item in items
    ]
    plans = []
    for item, reply in zip(items, replies, strict=True):
        if not reply or isinstance(reply[0], int):
            plans.append("copy")  # (part of it lost: the copy is written whole)
        elif text(reply[0]) == value_json(item.value) and int(text(reply[1])) == micros(
            item.created_at
        ):
            plans.append("present" if reply[3] else "present, no vectors")
        else:
            plans.append("replace" if recopy else "conflict")
    return plans


def run_import(
    config: StoreConfig,
    items: Sequence[Item],
    embedding: Embedding | None = None,
    *,
    ttl_minutes: float | None = None,
    recopy: bool = False,
) -> Generator[list[Call], list[Any], list[str]]:
    """The (valid) items copied in, one ``store_import`` each, in one round; returns each
    one's status: "copied", "present", "conflict", "replaced", or with an index "retry" (an
    item sent without vectors that is to be written after all: see the script). A copy gets
    the vectors ``embedding`` has for it, and a TTL of ``ttl_minutes`` (else none)."""
    embedding = embedding or Embedding()
    now = "" if config.clock is None else str(config.clock())
    ttl = "" if ttl_minutes is None else str(int(float(ttl_minutes) * 60_000))
    index = namespace_index_key(config.prefix)
    # each namespace into the global index first, as a put writes it ahead
    namespaces = list(dict.fromkeys(index_member(tuple(i.namespace)) for i in items))
    calls: list[Call] = [("command", "ZADD", [index, *_members(namespaces)], ())]
    for item in items:
        namespace = tuple(item.namespace)
        tags = namespace_tags(namespace) if config.server_search else ""
        vectors = embedding.vectors.get((namespace, item.key), b"")
        args = [
            now,
            item.key,
            value_json(item.value),
            str(micros(item.created_at)),
            str(micros(item.updated_at)),
            ttl,
            vectors,
            tags,
            "1" if recopy else "",
            "1" if config.dims is not None and not vectors else "",
        ]
        calls.append(("script", "store_import", namespace_keys(config.prefix, namespace), args))
    replies = yield calls
    statuses = [text(reply[0]) for reply in replies[1:]]
    # a namespace that was empty before its copy: indexed once more (a sweep may have run)
    again = list(
        dict.fromkeys(
            index_member(tuple(item.namespace))
            for item, reply in zip(items, replies[1:], strict=True)
            if int(reply[1]) == 1
        )
    )
    if again:
        yield [("command", "ZADD", [index, *_members(again)], ())]
    return statuses


def _members(namespaces: Sequence[str]) -> list[Any]:
    return [m for n in namespaces for m in (0, n)]


class ImportBatch:
    """The items of one ``import_items`` call: the invalid ones get an "invalid: why" status
    and are not sent; the statuses of the others are merged back in order."""

    def __init__(self, items: Sequence[Item]) -> None:
        self.items = list(items)
        self.reasons = [invalid_reason(item) for item in self.items]
        self.valid = [i for i, why in zip(self.items, self.reasons, strict=True) if why is None]

    def to_embed(self, plans: Sequence[str], among: Sequence[int]) -> list[PutOp]:
        """The puts whose texts a store with an index embeds, of the valid items ``among``:
        those to write, and the present ones without vectors (``import_plans``; none were
        made without an index)."""
        if not plans:
            return []
        wanted = ("copy", "replace", "present, no vectors")
        return [
            PutOp(tuple(self.valid[i].namespace), self.valid[i].key, self.valid[i].value)
            for i in among
            if plans[i] in wanted
        ]

    def statuses(self, valid: Sequence[str]) -> list[str]:
        """Every item's status: ``valid``'s for the valid ones, in order."""
        answers = iter(valid)
        return [next(answers) if why is None else f"invalid: {why}" for why in self.reasons]

    def dry_run(self, plans: Sequence[str]) -> list[str]:
        return self.statuses(
            [DRY_RUN.get(p, "present" if p.startswith("present") else p) for p in plans]
        )


IMPORT_ATTEMPTS = 3  # an import's items changed meanwhile are planned again, this many times


@dataclass
class EmbedRequest:
    """A step of :func:`import_steps` that is not a round of calls: the driver embeds these
    puts (``vectors.plan`` and the store's sync or async embedder) and sends the Embedding."""

    puts: list[PutOp]


def import_steps(
    config: StoreConfig,
    batch: ImportBatch,
    *,
    ttl_minutes: float | None,
    recopy: bool,
    dry_run: bool,
) -> Generator[list[Call] | EmbedRequest, Any, list[str]]:
    """``import_items`` sans I/O: rounds of calls and, with an index, embed requests; returns
    each item's status (see ``RedisStore.import_items``). With an index, the items are
    planned first so that only those to write (and the present ones without vectors) are
    embedded; an item that changed meanwhile ("retry") is planned and embedded again, up to
    :data:`IMPORT_ATTEMPTS` times."""
    indexed = config.dims is not None
    plans: list[str] = []
    if dry_run or indexed:
        plans = yield from import_plans(config, batch.valid, recopy=recopy)
    if dry_run:
        return batch.dry_run(plans)
    items = batch.valid
    statuses = [""] * len(items)
    todo = list(range(len(items)))
    for _ in range(IMPORT_ATTEMPTS):
        embedding = (yield EmbedRequest(batch.to_embed(plans, todo))) if indexed else None
        done = yield from run_import(
            config, [items[i] for i in todo], embedding, ttl_minutes=ttl_minutes, recopy=recopy
        )
        for i, status in zip(todo, done, strict=True):
            statuses[i] = status
        todo = [i for i in todo if statuses[i] == "retry"]
        if not todo:
            break
        plans = yield from import_plans(config, items, recopy=recopy)
    return batch.statuses(statuses)
