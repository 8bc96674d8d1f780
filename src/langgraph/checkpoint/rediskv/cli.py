"""The inspection and maintenance commands of ``rediskv``: threads, history, show, delete,
prune, copy, stats and doctor.

:mod:`.__main__` declares the arguments; each ``cmd_*`` function here takes the parsed
arguments and returns the exit code. A command first gathers its result as plain data, then
prints it either as JSON (``--json``: machine output on stdout, nothing else) or with
``rich`` (tables, pretty-printed values, a progress bar). User errors (an unknown thread, a
wrong argument, an unreachable server) are raised as :class:`CliError`, which the front
reports as one line on stderr.

Checkpoints are read and changed through the public :class:`RedisSaver` API. What the API
does not offer (SCAN, MEMORY USAGE, TTL, INFO, SCRIPT EXISTS, checkpoint counts) is asked of
``saver.client`` directly, with every key and pattern built by :class:`KeySchema`.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import hashlib
import importlib
import json
import os
import sys
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

import redis

from .base import UNAVAILABLE
from .check import Problem
from .keys import KeySchema, decode_part
from .scripts import script_sources
from .settings import redact_url, resolve_url
from .sync import RedisSaver

if TYPE_CHECKING:
    from langchain_core.runnables import RunnableConfig
    from rich.console import Console, RenderableType
    from rich.progress import Progress

T = TypeVar("T")

INSTALL_HINT = "pip install 'langgraph-checkpoint-rediskv[cli]'"
SCAN_COUNT = 1000
PIPELINE_SIZE = 500  # commands per pipeline
MIN_VERSION = (6, 2)
TOP_THREADS = 10
# maxmemory policies that never evict a key without a TTL (volatile-*: only keys with one)
SAFE_POLICIES = ("noeviction", "volatile-")


class CliError(Exception):
    """A user-facing error: reported as one line on stderr, exit code 1."""


# -- connection and helpers ------------------------------------------------------------------


@contextmanager
def open_saver(args: argparse.Namespace, *, ttl: Any = None) -> Iterator[RedisSaver]:
    """A saver on ``--url`` / ``--prefix``, checked with a PING; closed afterwards."""
    url = resolve_url(args.url)
    KeySchema(args.prefix)  # a bad prefix fails before we connect
    saver = RedisSaver(url, prefix=args.prefix, ttl=ttl, retries=1)
    try:
        try:
            saver.client.ping()
        except UNAVAILABLE as exc:
            raise CliError(f"cannot reach Redis at {redact_url(url)}: {exc}") from None
        try:
            yield saver
        except UNAVAILABLE as exc:  # raw client calls (SCAN, INFO ...) failing midway
            raise CliError(f"lost the connection to Redis at {redact_url(url)}: {exc}") from None
    finally:
        saver.close()


def chunks(items: Sequence[T], size: int) -> Iterator[Sequence[T]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


def thread_config(
    thread_id: str, ns: str | None = None, checkpoint_id: str | None = None
) -> RunnableConfig:
    configurable: dict[str, Any] = {"thread_id": thread_id}
    if ns is not None:
        configurable["checkpoint_ns"] = ns
    if checkpoint_id is not None:
        configurable["checkpoint_id"] = checkpoint_id
    return {"configurable": configurable}


def tag_of(key: str) -> str | None:
    """The hash tag ``{T}`` of a key of the schema, or None."""
    start = key.find("{")
    end = key.find("}", start)
    return key[start : end + 1] if start >= 0 and end > start else None


def kind_of(prefix: str, key: str) -> str:
    """The kind of a key under ``prefix`` (``cp``, ``blob``, ``idx`` ...)."""
    return key[len(prefix) + 1 :].split(":", 1)[0]


def scan_keys(saver: RedisSaver, pattern: str) -> list[bytes]:
    return list(saver.client.scan_iter(match=pattern, count=SCAN_COUNT))


def thread_key_list(saver: RedisSaver, thread_id: str) -> list[bytes]:
    """Every key of one thread (SCAN over its exact pattern)."""
    return scan_keys(saver, KeySchema(saver.prefix).thread_keys_pattern(thread_id))


def memory_usage(saver: RedisSaver, keys: Sequence[bytes]) -> list[int]:
    """MEMORY USAGE (all samples) of each key, pipelined; 0 for a key gone meanwhile."""
    sizes: list[int] = []
    for chunk in chunks(keys, PIPELINE_SIZE):
        pipe = saver.client.pipeline(transaction=False)
        for key in chunk:
            pipe.memory_usage(key, samples=0)
        sizes += [int(size or 0) for size in pipe.execute()]
    return sizes


def scan_thread_ids(saver: RedisSaver) -> list[str]:
    schema = KeySchema(saver.prefix)
    keys = scan_keys(saver, schema.thread_pattern())
    return sorted({schema.thread_id_of(k.decode()) for k in keys})


def thread_exists(saver: RedisSaver, thread_id: str) -> bool:
    schema = KeySchema(saver.prefix)
    return bool(saver.client.exists(schema.thread(schema.tag(thread_id))))


def no_checkpoints(saver: RedisSaver, thread_id: str, ns: str | None = None) -> CliError:
    where = "" if ns is None else f" in namespace {ns!r}"
    return CliError(f"thread {thread_id!r} has no checkpoints{where} under prefix {saver.prefix!r}")


def require_thread(saver: RedisSaver, thread_id: str) -> None:
    if not thread_exists(saver, thread_id):
        raise no_checkpoints(saver, thread_id)


@dataclass
class ThreadInfo:
    """What the indexes of one thread say: checkpoints per namespace, newest id, expiry."""

    thread_id: str
    ttl: int | None = None
    counts: dict[str, int] = field(default_factory=dict)  # namespace -> checkpoints
    newest_id: str = ""
    newest_ns: str = ""

    @property
    def checkpoints(self) -> int:
        return sum(self.counts.values())


def thread_infos(saver: RedisSaver, thread_ids: Sequence[str]) -> list[ThreadInfo]:
    """Checkpoint counts (ZCARD of each namespace index), the newest checkpoint id (ids sort
    lexically in time order) and the TTL of the thread index, pipelined."""
    schema = KeySchema(saver.prefix)
    infos: list[ThreadInfo] = []
    for chunk in chunks(thread_ids, PIPELINE_SIZE):
        pipe = saver.client.pipeline(transaction=False)
        for thread_id in chunk:
            thread_key = schema.thread(schema.tag(thread_id))
            pipe.smembers(thread_key)
            pipe.ttl(thread_key)
        replies = pipe.execute()
        pairs: list[tuple[ThreadInfo, str]] = []
        for i, thread_id in enumerate(chunk):
            members, ttl = replies[2 * i], int(replies[2 * i + 1])
            info = ThreadInfo(thread_id, ttl=ttl if ttl >= 0 else None)
            infos.append(info)
            pairs += [(info, decode_part(m.decode())) for m in sorted(members)]
        for pair_chunk in chunks(pairs, PIPELINE_SIZE):
            pipe = saver.client.pipeline(transaction=False)
            for info, ns in pair_chunk:
                index = schema.index(schema.tag(info.thread_id), ns)
                pipe.zcard(index)
                pipe.zrange(index, -1, -1)
            counted = pipe.execute()
            for j, (info, ns) in enumerate(pair_chunk):
                count, newest = int(counted[2 * j]), counted[2 * j + 1]
                if count:
                    info.counts[ns] = count
                if newest and newest[0].decode() > info.newest_id:
                    info.newest_id, info.newest_ns = newest[0].decode(), ns
    return infos


# -- output ----------------------------------------------------------------------------------


def _json_default(value: Any) -> Any:
    """JSON for what the serializer gives back: messages, pydantic models, dataclasses ..."""
    from langchain_core.messages import BaseMessage
    from pydantic import BaseModel

    if isinstance(value, BaseMessage):
        return {
            "type": value.type,
            **value.model_dump(mode="json", exclude_defaults=True, exclude={"type"}),
        }
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}
    if isinstance(value, (set, frozenset)):
        return sorted(value, key=repr)
    if isinstance(value, (datetime.datetime, datetime.date, datetime.time)):
        return value.isoformat()
    if isinstance(value, bytes):
        return value.decode("utf-8", "backslashreplace")
    return repr(value)


def emit_json(data: Any) -> int:
    sys.stdout.write(json.dumps(data, indent=2, ensure_ascii=False, default=_json_default) + "\n")
    return 0


def make_console(*, stderr: bool = False) -> Console:
    try:
        importlib.import_module("rich")
    except ImportError:
        raise CliError(
            f"the command-line tool needs the optional package 'rich': {INSTALL_HINT} "
            "(or use --json)"
        ) from None
    from rich.console import Console

    console = Console(highlight=False, stderr=stderr)
    if not console.is_terminal and "COLUMNS" not in os.environ:
        console.width = 200  # piped output: keep table rows on one line
    return console


def human_bytes(size: int) -> str:
    value = float(size)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{size} B" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")


def short_ts(ts: str | None) -> str:
    """``2025-01-02T03:04:05.678+00:00`` as ``2025-01-02 03:04:05`` (UTC)."""
    if not ts:
        return "-"
    try:
        moment = datetime.datetime.fromisoformat(ts)
    except ValueError:
        return ts
    if moment.tzinfo is not None:
        moment = moment.astimezone(datetime.timezone.utc)
    return moment.strftime("%Y-%m-%d %H:%M:%S")


def ttl_text(ttl: int | None) -> str:
    return "none" if ttl is None else f"{ttl}s"


def _escape(text: str) -> str:
    from rich.markup import escape

    return escape(text)


def print_fields(console: Console, fields: Sequence[tuple[str, str]], *, markup: str = "") -> None:
    """``name  value`` lines, the values aligned (plain lines: no trailing padding)."""
    width = max(len(name) for name, _ in fields)
    for name, value in fields:
        label = f"[{markup}]{_escape(name)}[/]" if markup else _escape(name)
        console.print(label + " " * (width - len(name) + 2) + _escape(value), soft_wrap=True)


# -- threads -----------------------------------------------------------------------------------


def cmd_threads(args: argparse.Namespace) -> int:
    with open_saver(args) as saver:
        infos = thread_infos(saver, scan_thread_ids(saver))
        infos.sort(key=lambda i: i.thread_id)
        infos.sort(key=lambda i: i.newest_id, reverse=True)  # newest first, then by id
        page = infos[args.offset : args.offset + args.limit]
        rows: list[dict[str, Any]] = []
        for info in page:
            ts = None
            if info.newest_id:
                config = thread_config(info.thread_id, info.newest_ns, info.newest_id)
                newest = saver.get_tuple(config)
                ts = newest.checkpoint.get("ts") if newest else None
            keys = thread_key_list(saver, info.thread_id)
            rows.append(
                {
                    "thread_id": info.thread_id,
                    "last_activity": ts,
                    "checkpoints": info.checkpoints,
                    "size_bytes": sum(memory_usage(saver, keys)),
                    "ttl": info.ttl,
                }
            )
        data = {
            "prefix": saver.prefix,
            "total": len(infos),
            "offset": args.offset,
            "limit": args.limit,
            "threads": rows,
        }
    if args.json:
        return emit_json(data)
    console = make_console()
    if not infos:
        console.print(_escape(f"no threads under prefix {data['prefix']!r}"))
        return 0
    from rich.table import Table

    table = Table(title=_escape(f"Threads under prefix {data['prefix']!r} (newest first)"))
    table.add_column("thread")
    table.add_column("last activity (UTC)")
    table.add_column("checkpoints", justify="right")
    table.add_column("size", justify="right")
    table.add_column("ttl", justify="right")
    for row in rows:
        table.add_row(
            _escape(row["thread_id"]),
            short_ts(row["last_activity"]),
            str(row["checkpoints"]),
            human_bytes(row["size_bytes"]),
            ttl_text(row["ttl"]),
        )
    console.print(table)
    shown = f"{args.offset + 1}-{args.offset + len(rows)}" if rows else "none"
    more = args.offset + len(rows) < len(infos)
    console.print(
        f"threads {shown} of {len(infos)}"
        + (f"; next page: --offset {args.offset + len(rows)}" if more else "")
    )
    return 0


# -- history -----------------------------------------------------------------------------------


def cmd_history(args: argparse.Namespace) -> int:
    with open_saver(args) as saver:
        require_thread(saver, args.thread)
        (info,) = thread_infos(saver, [args.thread])
        tuples = list(saver.list(thread_config(args.thread, args.ns), limit=args.limit))
        if not tuples:
            raise no_checkpoints(saver, args.thread, args.ns)
        total = info.checkpoints if args.ns is None else info.counts.get(args.ns, 0)
        rows = []
        for tup in tuples:
            configurable = tup.config["configurable"]
            parent = (tup.parent_config or {}).get("configurable", {})
            metadata: dict[str, Any] = dict(tup.metadata or {})
            rows.append(
                {
                    "checkpoint_id": configurable["checkpoint_id"],
                    "checkpoint_ns": configurable.get("checkpoint_ns", ""),
                    "parent_id": parent.get("checkpoint_id"),
                    "step": metadata.get("step"),
                    "source": metadata.get("source"),
                    "pending_writes": len(tup.pending_writes or []),
                    "ts": tup.checkpoint.get("ts"),
                }
            )
        data = {"thread_id": args.thread, "total": total, "checkpoints": rows}
    if args.json:
        return emit_json(data)
    from rich.table import Table

    console = make_console()
    with_ns = any(row["checkpoint_ns"] for row in rows)
    where = "" if args.ns is None else f", namespace {args.ns!r}"
    table = Table(title=_escape(f"Checkpoints of thread {args.thread!r}{where} (newest first)"))
    table.add_column("checkpoint id", no_wrap=True)
    if with_ns:
        table.add_column("ns")
    table.add_column("step", justify="right")
    table.add_column("source")
    table.add_column("writes", justify="right")
    table.add_column("time (UTC)", no_wrap=True)
    for row in rows:
        cells = [row["checkpoint_id"]]
        if with_ns:
            cells.append(row["checkpoint_ns"])
        cells += [
            str(row["step"]),
            str(row["source"]),
            str(row["pending_writes"]),
            short_ts(row["ts"]),
        ]
        table.add_row(*map(_escape, cells))
    console.print(table)
    console.print(f"{len(rows)} of {total} checkpoints")
    return 0


# -- show ----------------------------------------------------------------------------------------


def _is_messages(value: Any) -> bool:
    from langchain_core.messages import BaseMessage

    if isinstance(value, BaseMessage):
        return True
    return (
        isinstance(value, (list, tuple))
        and bool(value)
        and all(isinstance(v, BaseMessage) for v in value)
    )


def message_line(message: Any) -> str:
    """``type: content`` (content blocks as JSON), with any tool calls appended."""
    content = message.content
    text = content if isinstance(content, str) else json.dumps(content, default=_json_default)
    calls = getattr(message, "tool_calls", None) or []
    if calls:
        text += (
            " [tool calls: "
            + ", ".join(
                f"{c.get('name')}({json.dumps(c.get('args'), default=_json_default)})"
                for c in calls
            )
            + "]"
        )
    return f"{message.type}: {text}"


def _readable(value: Any) -> RenderableType:
    from rich.pretty import Pretty
    from rich.text import Text

    if _is_messages(value):
        messages = value if isinstance(value, (list, tuple)) else [value]
        return Text("\n".join(message_line(m) for m in messages))
    return Pretty(value)


def cmd_show(args: argparse.Namespace) -> int:
    with open_saver(args) as saver:
        require_thread(saver, args.thread)
        tup = saver.get_tuple(thread_config(args.thread, args.ns, args.checkpoint))
        if tup is None:
            if args.checkpoint is None:
                raise no_checkpoints(saver, args.thread, args.ns)
            raise CliError(
                f"no checkpoint {args.checkpoint!r} in thread {args.thread!r}, namespace "
                f"{args.ns!r}, under prefix {saver.prefix!r}"
            )
    configurable = tup.config["configurable"]
    parent = (tup.parent_config or {}).get("configurable", {})
    data = {
        "thread_id": args.thread,
        "checkpoint_ns": configurable.get("checkpoint_ns", ""),
        "checkpoint_id": configurable["checkpoint_id"],
        "parent_id": parent.get("checkpoint_id"),
        "ts": tup.checkpoint.get("ts"),
        "metadata": dict(tup.metadata or {}),
        "channel_values": dict(tup.checkpoint.get("channel_values") or {}),
        "pending_writes": [
            {"task_id": task, "channel": channel, "value": value}
            for task, channel, value in tup.pending_writes or []
        ],
    }
    if args.json:
        return emit_json(data)
    from rich.pretty import Pretty
    from rich.table import Table

    console = make_console()
    print_fields(
        console,
        [
            ("thread", data["thread_id"]),
            ("namespace", data["checkpoint_ns"] or '"" (root)'),
            ("checkpoint", data["checkpoint_id"]),
            ("parent", data["parent_id"] or "none"),
            ("time (UTC)", short_ts(data["ts"])),
        ],
        markup="bold",
    )

    values = Table(show_lines=True)
    values.add_column("channel", no_wrap=True)
    values.add_column("value")
    for channel, value in data["channel_values"].items():
        values.add_row(_escape(channel), _readable(value))
    if data["channel_values"]:
        console.print("[bold]State (channel values)[/]")
        console.print(values)
    else:
        console.print("[bold]State[/]: no channel values")

    console.print("[bold]Metadata[/]")
    console.print(Pretty(data["metadata"]))

    if data["pending_writes"]:
        writes = Table(show_lines=True)
        writes.add_column("task")
        writes.add_column("channel")
        writes.add_column("value")
        for write in data["pending_writes"]:
            writes.add_row(
                _escape(write["task_id"]), _escape(write["channel"]), _readable(write["value"])
            )
        console.print("[bold]Pending writes[/]")
        console.print(writes)
    else:
        console.print("[bold]Pending writes[/]: none")
    return 0


# -- delete, prune, copy ---------------------------------------------------------------------------


def cmd_delete(args: argparse.Namespace) -> int:
    with open_saver(args) as saver:
        require_thread(saver, args.thread)
        before = len(thread_key_list(saver, args.thread))
        saver.delete_thread(args.thread)
        after = len(thread_key_list(saver, args.thread))
        prefix = saver.prefix
    if args.json:
        return emit_json({"thread_id": args.thread, "keys_before": before, "keys_after": after})
    make_console().print(
        _escape(
            f"deleted thread {args.thread!r} under prefix {prefix!r}: "
            f"{before} keys before, {after} after"
        )
    )
    return 0


@contextmanager
def progress_bar(enabled: bool, total: int, what: str) -> Iterator[Progress | None]:
    """A transient rich progress bar on stderr when it is a terminal, else nothing."""
    if not enabled:
        yield None
        return
    console = make_console(stderr=True)
    if not console.is_terminal:
        yield None
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn

    with Progress(
        "[progress.description]{task.description}",
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        transient=True,
    ) as progress:
        progress.add_task(what, total=total)
        yield progress


def _dedupe(items: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(items))


def cmd_prune(args: argparse.Namespace) -> int:
    if args.all and args.threads:
        raise CliError("give thread ids or --all, not both")
    if not args.all and not args.threads:
        raise CliError("give the thread ids to prune, or --all for every thread")
    with open_saver(args) as saver:
        schema = KeySchema(saver.prefix)
        if args.all:
            thread_ids = scan_thread_ids(saver)
        else:
            thread_ids = _dedupe(args.threads)
            for thread_id in thread_ids:
                require_thread(saver, thread_id)

        def key_count() -> int:
            if args.all:
                return len(scan_keys(saver, schema.all_keys_pattern()))
            return sum(len(thread_key_list(saver, t)) for t in thread_ids)

        checkpoints_before = sum(i.checkpoints for i in thread_infos(saver, thread_ids))
        keys_before = key_count()
        with progress_bar(not args.json, len(thread_ids), f"prune ({args.strategy})") as progress:
            for batch in chunks(thread_ids, args.batch_size):
                saver.prune(batch, strategy=args.strategy)
                if progress is not None:
                    progress.advance(progress.task_ids[0], len(batch))
        data = {
            "prefix": saver.prefix,
            "strategy": args.strategy,
            "threads": len(thread_ids),
            "checkpoints_before": checkpoints_before,
            "checkpoints_after": sum(i.checkpoints for i in thread_infos(saver, thread_ids)),
            "keys_before": keys_before,
            "keys_after": key_count(),
        }
    if args.json:
        return emit_json(data)
    make_console().print(
        _escape(
            f"pruned {data['threads']} thread(s) under prefix {data['prefix']!r} "
            f"({data['strategy']}): checkpoints {data['checkpoints_before']} -> "
            f"{data['checkpoints_after']}, keys {data['keys_before']} -> {data['keys_after']}"
        )
    )
    return 0


def cmd_copy(args: argparse.Namespace) -> int:
    if args.source == args.target:
        raise CliError("the source and the target are the same thread")
    ttl = None if args.ttl is None else {"default_ttl": args.ttl}
    with open_saver(args, ttl=ttl) as saver:
        require_thread(saver, args.source)
        if thread_exists(saver, args.target):
            raise CliError(
                f"thread {args.target!r} already has checkpoints under prefix "
                f"{saver.prefix!r}: delete it first, or copy to a new thread id"
            )
        saver.copy_thread(args.source, args.target)
        (info,) = thread_infos(saver, [args.target])
        data = {
            "source": args.source,
            "target": args.target,
            "checkpoints": info.checkpoints,
            "keys": len(thread_key_list(saver, args.target)),
            "ttl": info.ttl,
        }
        prefix = saver.prefix
    if args.json:
        return emit_json(data)
    make_console().print(
        _escape(
            f"copied thread {args.source!r} to {args.target!r} under prefix {prefix!r}: "
            f"{data['checkpoints']} checkpoints, {data['keys']} keys, ttl {ttl_text(info.ttl)}"
        )
    )
    return 0


# -- stats -----------------------------------------------------------------------------------------


def cmd_stats(args: argparse.Namespace) -> int:
    with open_saver(args) as saver:
        schema = KeySchema(saver.prefix)
        keys = scan_keys(saver, schema.all_keys_pattern())
        sizes = memory_usage(saver, keys)
        by_kind: Counter[str] = Counter()
        thread_keys: Counter[str] = Counter()
        thread_bytes: Counter[str] = Counter()
        threads = 0
        for raw, size in zip(keys, sizes, strict=True):
            key = raw.decode()
            kind = kind_of(saver.prefix, key)
            by_kind[kind] += 1
            threads += kind == "th"
            tag = tag_of(key)
            if tag is not None:
                thread_id = schema.thread_from_tag(tag)
                thread_keys[thread_id] += 1
                thread_bytes[thread_id] += size
        top = sorted(thread_bytes, key=lambda t: (-thread_bytes[t], t))[:TOP_THREADS]
        data: dict[str, Any] = {
            "prefix": saver.prefix,
            "keys": len(keys),
            "threads": threads,
            "memory_bytes": sum(sizes),
            "keys_by_kind": dict(sorted(by_kind.items())),
            "top_threads": [
                {"thread_id": t, "keys": thread_keys[t], "size_bytes": thread_bytes[t]} for t in top
            ],
        }
    if args.json:
        return emit_json(data)
    from rich.table import Table

    console = make_console()
    print_fields(
        console,
        [
            ("prefix", data["prefix"]),
            ("keys", str(data["keys"])),
            ("threads", str(data["threads"])),
            ("memory", f"{human_bytes(data['memory_bytes'])} ({data['memory_bytes']} bytes)"),
            (
                "keys by kind",
                ", ".join(f"{kind} {n}" for kind, n in data["keys_by_kind"].items()) or "-",
            ),
        ],
        markup="bold",
    )
    if top:
        table = Table(title=f"Largest threads (top {TOP_THREADS})")
        table.add_column("thread")
        table.add_column("keys", justify="right")
        table.add_column("size", justify="right")
        table.add_column("bytes", justify="right")
        for row in data["top_threads"]:
            table.add_row(
                _escape(row["thread_id"]),
                str(row["keys"]),
                human_bytes(row["size_bytes"]),
                str(row["size_bytes"]),
            )
        console.print(table)
    return 0


# -- doctor ----------------------------------------------------------------------------------------


def _version_tuple(version: str) -> tuple[int, ...]:
    parts = []
    for part in version.split("."):
        digits = "".join(c for c in part if c.isdigit())
        if not digits:
            break
        parts.append(int(digits))
    return tuple(parts)


def _check(name: str, status: str, detail: str) -> dict[str, str]:
    return {"check": name, "status": status, "detail": detail}


def _server_check(client: redis.Redis) -> dict[str, str]:
    info = client.info("server")
    compat = str(info.get("redis_version", "?"))
    if "valkey_version" in info:
        name = f"Valkey {info['valkey_version']} (redis_version {compat})"
    else:
        name = f"Redis {compat}"
    if _version_tuple(compat) >= MIN_VERSION:
        return _check("server", "ok", f"{name}: 6.2 or later")
    return _check("server", "fail", f"{name}: the saver needs Redis 6.2 or later (or Valkey)")


def _memory_check(client: redis.Redis) -> dict[str, str]:
    info = client.info("memory")
    policy = str(info.get("maxmemory_policy", "unknown"))
    limit = int(info.get("maxmemory", 0) or 0)
    limit_text = f"maxmemory {human_bytes(limit)}" if limit else "no maxmemory limit"
    if policy.startswith(SAFE_POLICIES):
        return _check("maxmemory-policy", "ok", f"{policy} ({limit_text})")
    return _check(
        "maxmemory-policy",
        "warn",
        f"{policy} ({limit_text}): the server may evict single keys of a thread, which breaks "
        "it; use noeviction or a volatile-* policy",
    )


def _persistence_check(client: redis.Redis) -> dict[str, str]:
    aof = bool(int(client.info("persistence").get("aof_enabled", 0)))
    try:
        save = str(client.config_get("save").get("save", ""))
    except redis.ResponseError:
        save = None  # CONFIG is not allowed (managed services, ACLs)
    if save is None:
        rdb = "unknown (CONFIG GET not allowed)"
    else:
        rdb = f"save {save!r}" if save else "off"
    detail = f"aof {'on' if aof else 'off'}, rdb {rdb}"
    if not aof and save == "":
        return _check(
            "persistence", "warn", detail + ": checkpoints are lost when the server restarts"
        )
    return _check("persistence", "ok", detail)


def _scripts_check(client: redis.Redis) -> dict[str, str]:
    sources = script_sources()
    shas = {name: hashlib.sha1(source.encode()).hexdigest() for name, source in sources.items()}
    try:
        loaded = client.script_exists(*shas.values())
    except redis.ResponseError as exc:
        return _check("scripts", "warn", f"unknown: SCRIPT EXISTS failed: {exc}")
    missing = [name for name, ok in zip(shas, loaded, strict=True) if not ok]
    count = f"{len(shas) - len(missing)} of {len(shas)} loaded"
    if not missing:
        return _check("scripts", "ok", count)
    not_yet = f"; not yet: {', '.join(missing)}" if len(missing) < len(shas) else ""
    return _check("scripts", "info", f"{count}{not_yet} (loaded on first use)")


def cmd_doctor(args: argparse.Namespace) -> int:
    with open_saver(args) as saver:
        client = saver.client
        if not isinstance(client, redis.Redis):  # the CLI connects to one server
            raise CliError("doctor checks a single server, not a cluster")
        checks = [
            _server_check(client),
            _memory_check(client),
            _persistence_check(client),
            _scripts_check(client),  # before the invariant check, which loads check_thread
        ]
        problems: list[Problem] = saver.check_invariants()
        prefix = saver.prefix
    checks.append(
        _check(
            "invariants",
            "fail" if problems else "ok",
            f"{len(problems)} problem(s) under prefix {prefix!r}"
            if problems
            else f"no problems under prefix {prefix!r}",
        )
    )
    failed = any(c["status"] == "fail" for c in checks)
    code = 2 if failed else 0
    if args.json:
        emit_json(
            {
                "prefix": prefix,
                "ok": not failed,
                "checks": checks,
                "problems": [{"problem": p.problem, "key": p.key} for p in problems],
            }
        )
        return code
    console = make_console()
    styles = {"ok": "green", "info": "cyan", "warn": "yellow", "fail": "bold red"}
    width = max(len(c["check"]) for c in checks)
    for check in checks:
        status = check["status"]
        console.print(
            f"[{styles[status]}]{status:<4}[/]  [bold]{check['check']:<{width}}[/]  "
            + _escape(check["detail"]),
            soft_wrap=True,
        )
    for problem in problems:
        console.print(_escape(f"  {problem.problem}: {problem.key}"), soft_wrap=True)
    if failed:
        console.print(f"[bold red]doctor found problems[/] (exit code {code})")
    else:
        console.print("no problems")
    return code
