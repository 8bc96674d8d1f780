"""Copying another store's items into a :class:`~langgraph.store.rediskv.RedisStore`
(``rediskv store migrate``): every item of every namespace, with its value, created_at and
updated_at, then read back and compared.

The source is any ``BaseStore``, named by a URL (:data:`STORE_SOURCES`). It is read through
its public API: namespace by namespace (``list_namespaces``, then ``search`` of each in pages)
where its listing can be trusted; the official ``langgraph-checkpoint-redis`` store lists only
the namespaces of its first 10 documents (langgraph-checkpoint-redis 0.x), so it is read by
pages of one ``search`` over the whole prefix instead. Items present here already (the same
value and created_at) are skipped, so a run can be repeated or resumed.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from langgraph.store.base import BaseStore, GetOp, Item

from langgraph.checkpoint.rediskv.settings import redact_url

from . import RedisStore
from .core import micros

PAGE = 500  # items read from the source, and copied, at a time
NAMESPACE_PAGE = 1000  # namespaces listed at a time

# scheme -> what it opens, for the CLI's help and errors
STORE_SOURCES = {
    "postgresql://, postgres://": "langgraph-checkpoint-postgres (PostgresStore)",
    "langgraph-redis+redis[s]://HOST:PORT/DB": (
        "langgraph-checkpoint-redis (RedisStore, needs Redis 8 or Redis Stack)"
    ),
    "rediskv+redis[s]://HOST:PORT/DB?prefix=store": (
        "this package's RedisStore, on another prefix or server"
    ),
    "python:package.module:factory": (
        "any other store: factory() returns a BaseStore or a context manager yielding one"
    ),
}

# the packages each kind of source is read with (not dependencies of this package)
_SOURCE_PACKAGES = {
    "postgresql": "langgraph-checkpoint-postgres 'psycopg[binary]'",
    "postgres": "langgraph-checkpoint-postgres 'psycopg[binary]'",
    "langgraph-redis": "langgraph-checkpoint-redis",
}


@dataclass
class StoreSource:
    """A store to copy from, and how to read it: by namespace, or by one search."""

    store: BaseStore
    name: str
    by_namespace: bool = True

    def namespaces(self, prefix: tuple[str, ...]) -> list[tuple[str, ...]]:
        found: list[tuple[str, ...]] = []
        while True:
            page = self.store.list_namespaces(
                prefix=prefix or None, limit=NAMESPACE_PAGE, offset=len(found)
            )
            found.extend(tuple(n) for n in page)
            if len(page) < NAMESPACE_PAGE:
                return found

    def pages(self, namespace_prefix: tuple[str, ...], exact: bool) -> Iterator[list[Item]]:
        """The items under ``namespace_prefix`` (``exact``: of that namespace only), in pages."""
        offset = 0
        while True:
            page = self.store.search(namespace_prefix, limit=PAGE, offset=offset)
            offset += len(page)
            items = [
                Item(
                    value=i.value,
                    key=i.key,
                    namespace=tuple(i.namespace),
                    created_at=i.created_at,
                    updated_at=i.updated_at,
                )
                for i in page
                if not exact or tuple(i.namespace) == namespace_prefix
            ]
            if items:
                yield items
            if len(page) < PAGE:
                return


@dataclass
class StoreMigrationReport:
    """What a migration did: counts of items by status, and the problems found."""

    dry_run: bool
    namespaces: int = 0
    statuses: dict[str, int] = field(default_factory=dict)
    verified: int = 0
    # items whose updated_at is later here: their namespace held one as new here (or the
    # source had a tie), and a namespace's stamps go up (see core.run_import)
    restamped: int = 0
    problems: list[str] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def items(self) -> int:
        return sum(self.statuses.values())

    def count(self, status: str) -> int:
        return self.statuses.get(status, 0)

    @property
    def ok(self) -> bool:
        return not self.problems and not self.count("conflict")


@contextlib.contextmanager
def open_store_source(url: str) -> Iterator[StoreSource]:
    """The store a URL names (:data:`STORE_SOURCES`), closed afterwards."""
    with contextlib.ExitStack() as stack:
        try:
            source = _make_source(url, stack)
        except ModuleNotFoundError as exc:
            kind = url.partition(":")[0].partition("+")[0]
            if kind not in _SOURCE_PACKAGES:
                raise
            raise ValueError(
                f"reading a {kind} store needs the package that wrote it ({exc.name} is not "
                f"installed): pip install {_SOURCE_PACKAGES[kind]}"
            ) from exc
        yield source


def _make_source(url: str, stack: contextlib.ExitStack) -> StoreSource:
    scheme, sep, rest = url.partition(":")
    kind, plus, inner = scheme.partition("+")
    name = redact_url(url)
    if scheme in ("postgresql", "postgres"):
        from langgraph.store.postgres import PostgresStore

        return StoreSource(stack.enter_context(PostgresStore.from_conn_string(url)), name)
    if kind == "langgraph-redis" and plus and inner:
        from langgraph.store.redis import RedisStore as LangGraphRedisStore

        store = stack.enter_context(LangGraphRedisStore.from_conn_string(f"{inner}:{rest}"))
        store.setup()  # (its indexes: it reads nothing without them)
        return StoreSource(store, name, by_namespace=False)
    if kind == "rediskv" and plus and inner:
        from urllib.parse import parse_qs, urlsplit, urlunsplit

        parts = urlsplit(f"{inner}:{rest}")
        prefix = parse_qs(parts.query).get("prefix", ["store"])[0]
        server = urlunsplit(parts._replace(query=""))
        return StoreSource(
            stack.enter_context(RedisStore.from_conn_string(server, prefix=prefix)), name
        )
    if scheme == "python" and sep:
        return StoreSource(_factory_store(rest, stack), url)
    known = ", ".join(STORE_SOURCES)
    raise ValueError(f"unknown store source {name!r}: use one of {known}")


def _factory_store(spec: str, stack: contextlib.ExitStack) -> BaseStore:
    import importlib

    module_name, _, attr = spec.partition(":")
    if not module_name or not attr:
        raise ValueError(f"invalid source {spec!r}: use python:package.module:factory")
    if "" not in sys.path and os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())  # as `python -m` would: modules of the directory
    made: Any = getattr(importlib.import_module(module_name), attr)()
    if isinstance(made, contextlib.AbstractContextManager):
        made = stack.enter_context(made)
    if not isinstance(made, BaseStore):
        raise ValueError(f"python:{spec} gave {type(made).__name__}, not a BaseStore")
    return made


def migrate_store(
    source: StoreSource,
    target: RedisStore,
    *,
    namespace_prefix: tuple[str, ...] = (),
    dry_run: bool = False,
    verify: bool = True,
    recopy: bool = False,
    ttl_minutes: float | None = None,
    on_page: Callable[[int], None] | None = None,
) -> StoreMigrationReport:
    """Copy the source's items under ``namespace_prefix`` into ``target`` (see the module's
    docstring), then read each copied page back and compare. ``on_page`` is told how many
    items each page held."""
    report = StoreMigrationReport(dry_run=dry_run)
    started = time.monotonic()
    pages: Iterator[list[Item]]
    if source.by_namespace:
        namespaces = source.namespaces(namespace_prefix)
        pages = (p for n in namespaces for p in source.pages(n, exact=True))
        report.namespaces = len(namespaces)
    else:
        pages = source.pages(namespace_prefix, exact=False)
    seen: set[tuple[str, ...]] = set()
    for items in pages:
        statuses = target.import_items(
            items, ttl_minutes=ttl_minutes, recopy=recopy, dry_run=dry_run
        )
        for item, status in zip(items, statuses, strict=True):
            report.statuses[status] = report.statuses.get(status, 0) + 1
            if status == "conflict":
                report.problems.append(
                    f"{'.'.join(item.namespace)}/{item.key}: another item is here (--recopy "
                    "replaces it)"
                )
            seen.add(tuple(item.namespace))
        if verify and not dry_run:
            _verify(target, items, statuses, report)
        if on_page is not None:
            on_page(len(items))
    if not source.by_namespace:
        report.namespaces = len(seen)
    report.seconds = time.monotonic() - started
    return report


def _verify(
    target: RedisStore, items: list[Item], statuses: list[str], report: StoreMigrationReport
) -> None:
    """Each item copied or present is read back: its value and created_at equal the
    source's, its updated_at is the source's or later (counted as restamped)."""
    checked = [i for i, s in zip(items, statuses, strict=True) if s != "conflict"]
    copies = target.batch([GetOp(i.namespace, i.key, refresh_ttl=False) for i in checked])
    for item, copy in zip(checked, copies, strict=True):
        where = f"{'.'.join(item.namespace)}/{item.key}"
        if not isinstance(copy, Item):
            report.problems.append(f"{where}: not found after the copy")
        elif copy.value != item.value:
            report.problems.append(f"{where}: the value differs from the source's")
        elif micros(copy.created_at) != micros(item.created_at):
            report.problems.append(f"{where}: created_at differs from the source's")
        elif micros(copy.updated_at) < micros(item.updated_at):
            report.problems.append(f"{where}: updated_at is earlier than the source's")
        else:
            report.verified += 1
            report.restamped += micros(copy.updated_at) > micros(item.updated_at)
