"""The long-term memory store (:mod:`langgraph.store.rediskv`): ``store namespaces``,
``store items``, ``store stats`` and ``store migrate``.

Every fact comes from the store's own index (``S:store:ns``, read with ZRANGEBYLEX in steps)
and each namespace's keys (see :mod:`langgraph.store.rediskv.keys`), never from a SCAN of
the keyspace: ``namespaces`` costs the page it lists (with ``--max-depth``, the namespaces
under its prefix: ``list_namespaces``), ``items`` what ``search`` costs, ``stats`` what the
store holds. Only ``migrate`` writes.
"""

from __future__ import annotations

import argparse
import contextlib
import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from langgraph.store.base import Item

from langgraph.store.rediskv import RedisStore
from langgraph.store.rediskv.keys import (
    index_namespace,
    namespace_index_key,
    namespace_keys,
    prefix_range,
    text,
)

from ..base import UNAVAILABLE
from ..settings import redact_url
from .common import CliError, chunks
from .output import emit_json, escape, human_bytes, make_console, print_fields, progress_bar
from .store import memory_usage

INDEX_STEP = 1000  # namespaces read from the index at a time
TOP_NAMESPACES = 10
EXIT_PROBLEMS = 2  # migrate: a conflict, or a copy that differs


def parse_namespace(text: str) -> tuple[str, ...]:
    """``users.u1.memories`` -> ``("users", "u1", "memories")``; "" is the root."""
    if text == "":
        return ()
    labels = tuple(text.split("."))
    if any(label == "" for label in labels):
        raise CliError(f"not a namespace: {text!r} (labels joined by '.', none empty)")
    return labels


@contextmanager
def open_store(args: argparse.Namespace) -> Iterator[RedisStore]:
    """A store on ``--url`` / ``--store-prefix``, its connection checked first."""
    try:
        store = RedisStore(args.url, prefix=args.store_prefix, cluster=args.cluster)
    except ValueError as exc:
        raise CliError(str(exc)) from None
    url = redact_url(args.url or "redis://localhost:6379/0")
    try:
        try:
            store.client.exists(namespace_index_key(args.store_prefix))
        except UNAVAILABLE as exc:
            raise CliError(f"cannot reach Redis at {url}: {exc}") from None
        try:
            yield store
        except UNAVAILABLE as exc:
            raise CliError(f"lost the connection to Redis at {url}: {exc}") from None
    finally:
        store.close()


def _moment(score: Any) -> str | None:
    from datetime import datetime, timezone

    if score is None:
        return None
    return datetime.fromtimestamp(int(score) / 1_000_000, tz=timezone.utc).isoformat()


def namespace_counts(store: RedisStore, namespaces: list[tuple[str, ...]]) -> list[dict[str, Any]]:
    """Per namespace: items stored (expired ones not swept yet included), with a TTL, with
    vectors, and the newest update; pipelined, a few commands per namespace."""
    rows: list[dict[str, Any]] = []
    for chunk in chunks(namespaces):
        pipe = store.client.pipeline(transaction=False)
        for namespace in chunk:
            _, _, z, x, _, v, _ = namespace_keys(store.config.prefix, namespace)
            pipe.zcard(z)
            pipe.zcard(x)
            pipe.hlen(v)
            pipe.zrevrange(z, 0, 0, withscores=True)
        replies = pipe.execute()
        for n, namespace in enumerate(chunk):
            items, with_ttl, with_vectors, newest = replies[4 * n : 4 * n + 4]
            rows.append(
                {
                    "namespace": list(namespace),
                    "items": int(items),
                    "with_ttl": int(with_ttl),
                    "with_vectors": int(with_vectors),
                    "updated_at": _moment(newest[0][1]) if newest else None,
                }
            )
    return rows


# -- namespaces ------------------------------------------------------------------------------------


def cmd_store_namespaces(args: argparse.Namespace) -> int:
    prefix = parse_namespace(args.namespace_prefix)
    with open_store(args) as store:
        rows: list[dict[str, Any]]
        if args.max_depth is None:
            # the page of the index only, read (the index is swept lazily: a namespace
            # emptied since shows 0 items)
            low, high = prefix_range(prefix)
            names = store.client.zrangebylex(
                namespace_index_key(store.config.prefix),
                low,
                high,
                start=args.offset,
                num=args.limit,
            )
            rows = namespace_counts(store, [index_namespace(text(n)) for n in names])
        else:
            # a namespace cut by max_depth is a prefix, not a namespace: no counts of its own
            found = store.list_namespaces(
                prefix=prefix or None,
                max_depth=args.max_depth,
                limit=args.limit,
                offset=args.offset,
            )
            rows = [{"namespace": list(n)} for n in found]
        data = {
            "prefix": store.config.prefix,
            "namespace_prefix": list(prefix),
            "offset": args.offset,
            "limit": args.limit,
            "namespaces": rows,
        }
    if args.json:
        return emit_json(data)
    console = make_console()
    if not rows:
        under = f" under {args.namespace_prefix!r}" if prefix else ""
        console.print(escape(f"no namespaces{under} in store prefix {data['prefix']!r}"))
        return 0
    from rich.table import Table

    table = Table(title=escape(f"Namespaces of store prefix {data['prefix']!r}"))
    table.add_column("namespace")
    counted = args.max_depth is None
    if counted:
        for name in ("items", "with ttl", "with vectors"):
            table.add_column(name, justify="right")
        table.add_column("last update (UTC)")
    for row in rows:
        cells = [escape(".".join(row["namespace"]))]
        if counted:
            cells += [str(row["items"]), str(row["with_ttl"]), str(row["with_vectors"])]
            cells.append((row["updated_at"] or "-")[:19].replace("T", " "))
        table.add_row(*cells)
    console.print(table)
    return 0


# -- items -----------------------------------------------------------------------------------------


def _item_data(item: Item) -> dict[str, Any]:
    return {
        "namespace": list(item.namespace),
        "key": item.key,
        "value": item.value,
        "created_at": item.created_at.isoformat(),
        "updated_at": item.updated_at.isoformat(),
    }


def cmd_store_items(args: argparse.Namespace) -> int:
    namespace = parse_namespace(args.namespace)
    try:
        where = None if args.filter is None else json.loads(args.filter)
    except json.JSONDecodeError as exc:
        raise CliError(f"--filter is not JSON: {exc}") from None
    if where is not None and not isinstance(where, dict):
        raise CliError('--filter must be a JSON object, e.g. {"kind": "fact"}')
    with open_store(args) as store:
        # refresh_ttl=False: looking must not keep an item alive
        if args.key is not None:
            item = store.get(namespace, args.key, refresh_ttl=False)
            if item is None:
                raise CliError(f"no item {args.key!r} in namespace {args.namespace!r}")
            found: list[Item] = [item]
        else:
            found = list(
                store.search(
                    namespace, filter=where, limit=args.limit, offset=args.offset, refresh_ttl=False
                )
            )
        rows = [_item_data(i) for i in found]
    if args.json:
        return emit_json({"prefix": store.config.prefix, "items": rows})
    console = make_console()
    if not found:
        console.print(escape(f"no items under {args.namespace!r}"))
        return 0
    for row in rows:
        console.print(
            f"[bold]{escape('.'.join(row['namespace']))}[/] {escape(row['key'])}", soft_wrap=True
        )
        print_fields(
            console,
            [
                ("created", row["created_at"][:19].replace("T", " ")),
                ("updated", row["updated_at"][:19].replace("T", " ")),
                ("value", json.dumps(row["value"], ensure_ascii=False, indent=2)),
            ],
        )
    return 0


# -- stats -----------------------------------------------------------------------------------------


def indexed_namespaces(store: RedisStore) -> Iterator[tuple[str, ...]]:
    """Every namespace of the store's index, in steps of :data:`INDEX_STEP` (ZRANGEBYLEX)."""
    index = namespace_index_key(store.config.prefix)
    low = "-"
    while True:
        names = store.client.zrangebylex(index, low, "+", start=0, num=INDEX_STEP)
        for name in names:
            yield index_namespace(text(name))
        if len(names) < INDEX_STEP:
            return
        low = "(" + text(names[-1])


def cmd_store_stats(args: argparse.Namespace) -> int:
    with open_store(args) as store:
        rows = namespace_counts(store, list(indexed_namespaces(store)))
        held = [r for r in rows if r["items"]]
        keys = [
            key
            for row in held
            for key in namespace_keys(store.config.prefix, tuple(row["namespace"]))
        ]
        memory = memory_usage(store.client, keys)
        items = sum(r["items"] for r in held)
        top = sorted(held, key=lambda r: (-r["items"], r["namespace"]))[:TOP_NAMESPACES]
        data = {
            "prefix": store.config.prefix,
            "namespaces_indexed": len(rows),
            "namespaces": len(held),
            "items": items,
            "with_ttl": sum(r["with_ttl"] for r in held),
            "with_vectors": sum(r["with_vectors"] for r in held),
            "memory_bytes": memory.total,
            "bytes_per_item": None if memory.total is None or not items else memory.total // items,
            "memory_note": memory.note,
            "top_namespaces": top,
        }
    if args.json:
        return emit_json(data)
    console = make_console()
    print_fields(
        console,
        [
            ("store prefix", repr(data["prefix"])),
            ("namespaces", f"{data['namespaces']} ({data['namespaces_indexed']} indexed)"),
            (
                "items",
                f"{items} ({data['with_ttl']} with a ttl, {data['with_vectors']} with vectors)",
            ),
            ("memory", f"{human_bytes(memory.total)} ({memory.note})"),
            ("per item", human_bytes(data["bytes_per_item"])),
        ],
    )
    if top:
        from rich.table import Table

        table = Table(title=f"Largest {len(top)} namespaces")
        table.add_column("namespace")
        table.add_column("items", justify="right")
        for row in top:
            table.add_row(escape(".".join(row["namespace"])), str(row["items"]))
        console.print(table)
    return 0


# -- migrate ---------------------------------------------------------------------------------------


def cmd_store_migrate(args: argparse.Namespace) -> int:
    from langgraph.store.rediskv.migrate import migrate_store, open_store_source, redact_source

    prefix = parse_namespace(args.namespace_prefix)
    source_name = redact_source(args.source)
    with contextlib.ExitStack() as stack:
        try:  # the source first: its failures are named as its own
            source = stack.enter_context(open_store_source(args.source))
        except ImportError as exc:
            raise CliError(
                f"the source {source_name!r} needs a package that is not installed: {exc}"
            ) from None
        except UNAVAILABLE as exc:
            raise CliError(f"cannot reach the source {source_name}: {exc}") from None
        target = stack.enter_context(open_store(args))
        what = "dry run" if args.dry_run else "migrate"
        # the total is not known ahead (the source is read in pages): items so far
        with progress_bar(not args.json, None, what) as progress:

            def advance(count: int) -> None:
                if progress is not None:
                    progress.advance(progress.task_ids[0], count)

            report = migrate_store(
                source,
                target,
                namespace_prefix=prefix,
                dry_run=args.dry_run,
                verify=not args.no_verify,
                recopy=args.recopy,
                ttl_minutes=args.ttl,
                on_page=advance,
            )
        target_prefix = target.config.prefix
    data = {
        "source": source_name,
        "prefix": target_prefix,
        "dry_run": report.dry_run,
        "ok": report.ok,
        "namespaces": report.namespaces,
        "items": report.items,
        "statuses": dict(sorted(report.statuses.items())),
        "read": report.read,
        "repeated": report.repeated,
        "source_count": report.source_count,
        "verified": report.verified,
        "problems": report.problems,
        "more_problems": report.more_problems,
        "seconds": round(report.seconds, 3),
    }
    code = 0 if report.ok else EXIT_PROBLEMS
    if args.json:
        emit_json(data)
        return code
    console = make_console()
    for problem in report.problems[:20]:
        console.print(escape(problem), soft_wrap=True)
    hidden = len(report.problems) - 20 + report.more_problems
    if hidden > 0:
        console.print(escape(f"... {hidden} more"))
    statuses = sorted(report.statuses.items())
    counts = ", ".join(f"{n} {status}" for status, n in statuses) or "no items"
    if report.dry_run:
        summary = (
            f"dry run from {source_name} to store prefix {target_prefix!r}: "
            f"{report.namespaces} namespace(s), {counts}; nothing written"
        )
    else:
        verified = "not verified" if args.no_verify else f"{report.verified} verified"
        summary = (
            f"migrated from {source_name} to store prefix {target_prefix!r}: "
            f"{report.namespaces} namespace(s), {counts}, {verified} in {report.seconds:.1f} s"
        )
    console.print(escape(summary), soft_wrap=True)
    return code
