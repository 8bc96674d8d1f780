"""Copying another store's items into a :class:`~langgraph.store.rediskv.RedisStore`
(``rediskv store migrate``): every item under a namespace prefix, with its value, created_at
and updated_at, each copy read back and compared, and the items read counted against what
the source says it holds.

Sources (:data:`STORE_SOURCES`), each read so that a page can neither skip nor repeat an item
of a source nobody writes meanwhile:

* ``PostgresStore``: its ``store`` table directly, in pages of (prefix, key), its primary key
  (its ``search`` pages by OFFSET over updated_at, whose ties, a batch's one ``now()``, come in
  any order from one page to the next).
* this package's store on another prefix or server: its own keys (:mod:`.keys`), namespace by
  namespace in rank order.
* the official ``langgraph-checkpoint-redis`` store: its ``search`` in pages (its documents
  hold values in its own serialization); counted against its index's total, because a search
  stops at the server's MAXSEARCHRESULTS.
* any ``BaseStore`` a factory makes: its ``search`` in pages; an item returned twice (an order
  that changed between pages) is reported.

Writes go through :meth:`RedisStore.import_items` (one ``store_import`` script an item), so a
run can be repeated or resumed: the items present already are skipped.
"""

from __future__ import annotations

import contextlib
import hashlib
import re
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from langgraph.store.base import BaseStore, GetOp, Item

from langgraph.checkpoint.rediskv.migrate.sources import made_by_factory, opened_by_url
from langgraph.checkpoint.rediskv.settings import redact_url

from . import RedisStore
from .imports import micros, value_json
from .keys import index_namespace, namespace_index_key, namespace_keys, prefix_range, text

PAGE = 500  # items read from the source, and copied, at a time
INDEX_STEP = 1000  # namespaces read from a rediskv source's index at a time
PROBLEMS_KEPT = 1000  # problems listed in a report (the rest are counted)

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

_SECRET_PARAMS = re.compile(r"(pass(word)?|secret|token|key)", re.IGNORECASE)
_LIBPQ_PASSWORD = re.compile(r"(password\s*=\s*)('[^']*'|\S+)", re.IGNORECASE)


def redact_source(url: str) -> str:
    """A source as it may be printed: no password in its user part, its query or a libpq
    ``key=value`` string; an unknown kind of source as its scheme only."""
    scheme = url.partition(":")[0]
    known = scheme in ("postgresql", "postgres", "python") or scheme.partition("+")[0] in (
        "langgraph-redis",
        "rediskv",
    )
    if "://" not in url:
        if known:
            return url
        return _LIBPQ_PASSWORD.sub(r"\1***", url) if "=" in url else f"{scheme}:..."
    if not known:
        return f"{scheme}://..."
    parts = urlsplit(redact_url(url))
    query = [(k, "***" if _SECRET_PARAMS.search(k) else v) for k, v in parse_qsl(parts.query)]
    return urlunsplit(parts._replace(query=urlencode(query, safe="*")))


class StoreSourceError(RuntimeError):
    """Reading the source failed (named, so that it is not taken for the target's failure)."""


class StoreSource:
    """A store to copy from: its items under a namespace prefix, in pages; how many it holds
    there, when it can tell (else None)."""

    def __init__(self, name: str) -> None:
        self.name = name

    def pages(self, namespace_prefix: tuple[str, ...]) -> Iterator[list[Item]]:
        raise NotImplementedError

    def count(self, namespace_prefix: tuple[str, ...]) -> int | None:
        return None

    def shortfall(self, distinct: int, held: int | None) -> str | None:
        """Why the ``distinct`` items read may not be all the source holds (``held``, what
        :meth:`count` answered), or None."""
        if held is None or held == distinct:
            return None
        return f"read {distinct} distinct items, but the source holds {held}" + (
            ": it changed meanwhile" if held < distinct else ""
        )


class SearchSource(StoreSource):
    """A ``BaseStore`` read through ``search``, in pages of :data:`PAGE` by offset."""

    def __init__(self, store: BaseStore, name: str) -> None:
        super().__init__(name)
        self.store = store

    def pages(self, namespace_prefix: tuple[str, ...]) -> Iterator[list[Item]]:
        offset = 0
        while True:
            page = self.store.search(namespace_prefix, limit=PAGE, offset=offset)
            offset += len(page)
            if page:
                yield [_item(i.namespace, i.key, i.value, i.created_at, i.updated_at) for i in page]
            if len(page) < PAGE:
                return


class OfficialRedisSource(SearchSource):
    """The official store: its search, counted against its index's total."""

    def __init__(self, store: Any, url: str, name: str) -> None:
        super().__init__(store, name)
        self.url = url
        self.index_name: str = store.store_prefix  # (its search index is named so)

    def count(self, namespace_prefix: tuple[str, ...]) -> int | None:
        if namespace_prefix:
            return None  # (its prefix query is its own; only the whole store is counted)
        import redis

        with redis.Redis.from_url(self.url) as client:
            reply: Any = client.execute_command("FT.SEARCH", self.index_name, "*", "LIMIT", 0, 0)
        if isinstance(reply, dict):  # RESP3
            total: Any = reply.get(b"total_results", reply.get("total_results", 0))
            return int(total)
        return int(reply[0])

    def shortfall(self, distinct: int, held: int | None) -> str | None:
        """A search returns nothing past the server's MAXSEARCHRESULTS: reading that many
        means the rest (if any) went unread."""
        import redis

        found = super().shortfall(distinct, held)
        if found is not None:
            return found if found.endswith("meanwhile") else f"{found}: its search stops short"
        try:
            with redis.Redis.from_url(self.url) as client:
                reply: Any = client.execute_command("FT.CONFIG", "GET", "MAXSEARCHRESULTS")
        except redis.ResponseError:
            return None  # (not allowed: the count above is the check)
        pairs = reply.items() if isinstance(reply, dict) else [tuple(p) for p in reply]
        cap = next((int(v) for k, v in pairs if text(k).upper() == "MAXSEARCHRESULTS"), None)
        if cap is not None and distinct >= cap:
            return (
                f"read {distinct} items, the source server's MAXSEARCHRESULTS: a search returns "
                "none past it, so some may be unread (raise it with FT.CONFIG SET, or migrate "
                "under narrower --namespace prefixes)"
            )
        return None


class PostgresSource(StoreSource):
    """PostgresStore's ``store`` table, in pages of its primary key (prefix, key); items past
    their ``expires_at`` are left out, as the store leaves them out."""

    def __init__(self, url: str, stack: contextlib.ExitStack) -> None:
        import psycopg
        from psycopg.rows import tuple_row

        super().__init__(redact_source(url))
        self.conn = stack.enter_context(
            psycopg.connect(url, autocommit=True, row_factory=tuple_row)
        )
        columns = {
            row[0]
            for row in self.conn.execute(
                "SELECT column_name FROM information_schema.columns WHERE table_name = 'store'"
            )
        }
        if not columns:
            raise ValueError(f"{self.name} has no PostgresStore table 'store'")
        self.live = (
            "AND (expires_at IS NULL OR expires_at > NOW())" if "expires_at" in columns else ""
        )

    def _where(self, namespace_prefix: tuple[str, ...]) -> tuple[str, list[Any]]:
        if not namespace_prefix:
            return f"TRUE {self.live}", []
        text = ".".join(namespace_prefix)
        like = text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + ".%"
        return f"(prefix = %s OR prefix LIKE %s) {self.live}", [text, like]

    def pages(self, namespace_prefix: tuple[str, ...]) -> Iterator[list[Item]]:
        where, params = self._where(namespace_prefix)
        after: tuple[str, str] | None = None
        while True:
            bound = "" if after is None else "AND (prefix, key) > (%s, %s)"
            rows = self.conn.execute(
                f"SELECT prefix, key, value, created_at, updated_at FROM store "
                f"WHERE {where} {bound} ORDER BY prefix, key LIMIT {PAGE}",
                [*params, *(after or ())],
            ).fetchall()
            if rows:
                yield [_item(tuple(p.split(".")), k, v, c, u) for p, k, v, c, u in rows]
                after = (rows[-1][0], rows[-1][1])
            if len(rows) < PAGE:
                return

    def count(self, namespace_prefix: tuple[str, ...]) -> int | None:
        where, params = self._where(namespace_prefix)
        row = self.conn.execute(f"SELECT count(*) FROM store WHERE {where}", params).fetchone()
        return int(row[0]) if row else 0


class RediskvSource(StoreSource):
    """This package's store: its namespace index in steps, each namespace's index in rank
    order (oldest first), values and created_at read with it; expired items left out."""

    def __init__(self, store: RedisStore, name: str) -> None:
        super().__init__(name)
        self.store = store

    def namespaces(self, namespace_prefix: tuple[str, ...]) -> Iterator[tuple[str, ...]]:
        client: Any = self.store.client
        index = namespace_index_key(self.store.config.prefix)
        low, high = prefix_range(namespace_prefix)
        while True:
            names = client.zrangebylex(index, low, high, start=0, num=INDEX_STEP)
            for name in names:
                yield index_namespace(text(name))
            if len(names) < INDEX_STEP:
                return
            low = "(" + text(names[-1])

    def pages(self, namespace_prefix: tuple[str, ...]) -> Iterator[list[Item]]:
        client: Any = self.store.client
        for namespace in self.namespaces(namespace_prefix):
            h, m, z, x, _, _, _ = namespace_keys(self.store.config.prefix, namespace)
            start = 0
            while True:
                entries = client.zrange(z, start, start + PAGE - 1, withscores=True)
                start += PAGE
                if entries:
                    keys = [text(k) for k, _ in entries]
                    pipe = client.pipeline(transaction=False)
                    pipe.hmget(h, keys)
                    pipe.hmget(m, keys)
                    pipe.execute_command("ZMSCORE", x, *keys)  # (several at once: redis-py 5.3)
                    pipe.time()
                    values, created, expiry, (seconds, micro) = pipe.execute()
                    now_ms = seconds * 1000 + micro // 1000
                    page = [
                        _item(namespace, key, _loads(value), _moment(made), _moment(score))
                        for key, (_, score), value, made, at in zip(
                            keys, entries, values, created, expiry, strict=True
                        )
                        if value is not None
                        and made is not None
                        and (at is None or float(at) > now_ms)
                    ]
                    if page:
                        yield page
                if len(entries) < PAGE:
                    break


@dataclass
class StoreMigrationReport:
    """What a migration did: items by status, what was read, verified, and the problems."""

    dry_run: bool
    namespaces: int = 0
    statuses: dict[str, int] = field(default_factory=dict)
    read: int = 0  # items the source gave, repeats included
    repeated: int = 0  # items it gave more than once
    source_count: int | None = None  # what it says it holds, where it can tell
    verified: int = 0
    problems: list[str] = field(default_factory=list)
    more_problems: int = 0  # not listed (past PROBLEMS_KEPT)
    seconds: float = 0.0

    @property
    def items(self) -> int:
        return sum(self.statuses.values())

    def count(self, status: str) -> int:
        return self.statuses.get(status, 0)

    @property
    def ok(self) -> bool:
        return not self.problems and not self.more_problems

    def problem(self, text: str) -> None:
        if len(self.problems) < PROBLEMS_KEPT:
            self.problems.append(text)
        else:
            self.more_problems += 1


@contextlib.contextmanager
def open_store_source(url: str) -> Iterator[StoreSource]:
    """The store a URL names (:data:`STORE_SOURCES`), closed afterwards."""
    with opened_by_url(url, _make_source, _SOURCE_PACKAGES, "store") as source:
        yield source


def _make_source(url: str, stack: contextlib.ExitStack) -> StoreSource:
    scheme, sep, rest = url.partition(":")
    kind, plus, inner = scheme.partition("+")
    name = redact_source(url)
    if scheme in ("postgresql", "postgres"):
        return PostgresSource(url, stack)
    if kind == "langgraph-redis" and plus and inner:
        from langgraph.store.redis import RedisStore as LangGraphRedisStore

        server = f"{inner}:{rest}"
        # (no setup(): a migration does not write into its source; a store in use has its index)
        store = stack.enter_context(LangGraphRedisStore.from_conn_string(server))
        return OfficialRedisSource(store, server, name)
    if kind == "rediskv" and plus and inner:
        parts = urlsplit(f"{inner}:{rest}")
        params = dict(parse_qsl(parts.query))
        unknown = set(params) - {"prefix"}
        if unknown:
            raise ValueError(f"{name}: unknown parameter(s) {sorted(unknown)} (only prefix=)")
        server = urlunsplit(parts._replace(query=""))
        own = stack.enter_context(
            RedisStore.from_conn_string(server, prefix=params.get("prefix", "store"))
        )
        return RediskvSource(own, name)
    if scheme == "python" and sep:
        return SearchSource(_factory_store(rest, stack), url)
    known = ", ".join(STORE_SOURCES)
    raise ValueError(f"unknown store source {name!r}: use one of {known}")


def _factory_store(spec: str, stack: contextlib.ExitStack) -> BaseStore:
    made = made_by_factory(spec, stack)
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
    docstring), read each page's copies back and compare them, and count the items read
    against the source's own count. ``on_page`` is told how many items each page held."""
    report = StoreMigrationReport(dry_run=dry_run)
    started = time.monotonic()
    seen: set[bytes] = set()
    namespaces: set[tuple[str, ...]] = set()
    for items in _read(source, namespace_prefix):
        report.read += len(items)
        fresh = []
        for item in items:
            digest = hashlib.blake2b(
                repr((tuple(item.namespace), item.key)).encode(), digest_size=12
            ).digest()
            if digest in seen:
                report.repeated += 1
            else:
                seen.add(digest)
                fresh.append(item)
        statuses = target.import_items(
            fresh, ttl_minutes=ttl_minutes, recopy=recopy, dry_run=dry_run
        )
        for item, status in zip(fresh, statuses, strict=True):
            report.statuses[status.partition(":")[0]] = report.count(status.partition(":")[0]) + 1
            where = f"{'.'.join(map(str, item.namespace))}/{item.key}"
            if status == "conflict":
                report.problem(f"{where}: another item is here (--recopy replaces it)")
            elif status.startswith("invalid"):
                report.problem(f"{where}: not copied, {status.partition(': ')[2]}")
            elif status == "retry":
                report.problem(f"{where}: not copied, it kept changing here: run again")
            namespaces.add(tuple(item.namespace))
        if verify and not dry_run:
            _verify(target, fresh, statuses, report)
        if on_page is not None:
            on_page(len(items))
    report.namespaces = len(namespaces)
    if report.repeated:
        report.problem(
            f"the source gave {report.repeated} item(s) twice: its order changed between pages "
            "(written meanwhile?), so others may have been skipped: run the migration again"
        )
    try:
        report.source_count = source.count(namespace_prefix)
        short = source.shortfall(len(seen), report.source_count)
    except Exception as exc:
        raise StoreSourceError(f"counting the items of {source.name}: {_first_line(exc)}") from exc
    if short is not None:
        report.problem(short)
    report.seconds = time.monotonic() - started
    return report


def _read(source: StoreSource, namespace_prefix: tuple[str, ...]) -> Iterator[list[Item]]:
    """The source's pages, its failures named as the source's."""
    pages = source.pages(namespace_prefix)
    while True:
        try:
            page = next(pages)
        except StopIteration:
            return
        except Exception as exc:
            raise StoreSourceError(f"reading {source.name}: {_first_line(exc)}") from exc
        yield page


def _verify(
    target: RedisStore, items: list[Item], statuses: list[str], report: StoreMigrationReport
) -> None:
    """Each item copied, present or replaced, read back: its value JSON and created_at equal
    the source's, and its updated_at too, except for a replaced one (an update's stamp goes
    above its namespace's newest)."""
    checked = [
        (item, status)
        for item, status in zip(items, statuses, strict=True)
        if status in ("copied", "present", "replaced")
    ]
    copies = target.batch([GetOp(tuple(i.namespace), i.key, refresh_ttl=False) for i, _ in checked])
    for (item, status), copy in zip(checked, copies, strict=True):
        where = f"{'.'.join(item.namespace)}/{item.key}"
        if not isinstance(copy, Item):
            report.problem(f"{where}: not found after the copy")
        elif value_json(copy.value) != value_json(item.value):
            report.problem(f"{where}: the value differs from the source's")
        elif micros(copy.created_at) != micros(item.created_at):
            report.problem(f"{where}: created_at differs from the source's")
        elif status == "copied" and micros(copy.updated_at) != micros(item.updated_at):
            report.problem(f"{where}: updated_at differs from the source's")
        else:
            report.verified += 1


def _item(namespace: Any, key: str, value: Any, created: datetime, updated: datetime) -> Item:
    return Item(
        value=value,
        key=key,
        namespace=tuple(namespace),
        created_at=created,
        updated_at=updated,
    )


def _loads(value: Any) -> Any:
    import json

    return json.loads(value)


def _moment(us: Any) -> datetime:
    micro = int(float(text(us)))
    return datetime.fromtimestamp(micro // 1_000_000, tz=timezone.utc).replace(
        microsecond=micro % 1_000_000
    )


def _first_line(exc: BaseException) -> str:
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    return lines[0] if lines else type(exc).__name__
