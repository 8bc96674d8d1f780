"""Reading threads: ``threads`` (the list), ``history`` (a thread's checkpoints), ``show``
(one checkpoint's state)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from .common import CliError, no_checkpoints, open_saver, thread_config
from .output import (
    emit_json,
    escape,
    human_bytes,
    make_console,
    print_fields,
    short_ts,
    to_json_text,
    ttl_text,
)
from .store import (
    MEMORY_ESTIMATE,
    checkpoint_count,
    memory_usage,
    require_thread,
    scan_thread_ids,
    thread_infos,
    walk_thread,
)

if TYPE_CHECKING:
    from rich.console import RenderableType

# -- threads -----------------------------------------------------------------------------------


def cmd_threads(args: argparse.Namespace) -> int:
    with open_saver(args) as saver:
        # the one SCAN pass; then each thread's root and the tails of its indexes
        infos = thread_infos(saver, scan_thread_ids(saver))
        infos.sort(key=lambda i: i.thread_id)
        infos.sort(key=lambda i: i.newest_id, reverse=True)  # newest first, then by id
        page = infos[args.offset : args.offset + args.limit]
        rows: list[dict[str, Any]] = []
        note = MEMORY_ESTIMATE
        for info in page:  # the listed threads only, each from its own keys
            ts = None
            if info.newest_id:
                config = thread_config(info.thread_id, info.newest_ns, info.newest_id)
                newest = saver.get_tuple(config)
                ts = newest.checkpoint.get("ts") if newest else None
            walked = walk_thread(saver, info.thread_id)
            memory = memory_usage(saver.client, walked.keys)
            note = memory.note
            rows.append(
                {
                    "thread_id": info.thread_id,
                    "last_activity": ts,
                    "checkpoints": walked.checkpoints,
                    "size_bytes": memory.total,
                    "ttl": info.ttl,
                }
            )
        data = {
            "prefix": saver.prefix,
            "total": len(infos),
            "offset": args.offset,
            "limit": args.limit,
            "memory_note": note,
            "threads": rows,
        }
    if args.json:
        return emit_json(data)
    console = make_console()
    if not infos:
        console.print(escape(f"no threads under prefix {data['prefix']!r}"))
        return 0
    from rich.table import Table

    table = Table(title=escape(f"Threads under prefix {data['prefix']!r} (newest first)"))
    table.add_column("thread")
    table.add_column("last activity (UTC)")
    table.add_column("checkpoints", justify="right")
    table.add_column("size", justify="right")
    table.add_column("ttl", justify="right")
    for row in rows:
        table.add_row(
            escape(row["thread_id"]),
            short_ts(row["last_activity"]),
            str(row["checkpoints"]),
            human_bytes(row["size_bytes"]),
            ttl_text(row["ttl"]),
        )
    console.print(table)
    shown = f"{args.offset + 1}-{args.offset + len(rows)}" if rows else "none"
    more = args.offset + len(rows) < len(infos)
    console.print(escape(f"size: {note}"))
    console.print(
        f"threads {shown} of {len(infos)}"
        + (f"; next page: --offset {args.offset + len(rows)}" if more else "")
    )
    return 0


# -- history -----------------------------------------------------------------------------------


def cmd_history(args: argparse.Namespace) -> int:
    with open_saver(args) as saver:
        require_thread(saver, args.thread)
        tuples = list(saver.list(thread_config(args.thread, args.ns), limit=args.limit))
        if not tuples:
            raise no_checkpoints(saver, args.thread, args.ns)
        total = checkpoint_count(saver, args.thread, args.ns)
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
    table = Table(title=escape(f"Checkpoints of thread {args.thread!r}{where} (newest first)"))
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
        table.add_row(*map(escape, cells))
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
    text = content if isinstance(content, str) else to_json_text(content)
    calls = getattr(message, "tool_calls", None) or []
    if calls:
        text += (
            " [tool calls: "
            + ", ".join(f"{c.get('name')}({to_json_text(c.get('args'))})" for c in calls)
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
        values.add_row(escape(channel), _readable(value))
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
                escape(write["task_id"]), escape(write["channel"]), _readable(write["value"])
            )
        console.print("[bold]Pending writes[/]")
        console.print(writes)
    else:
        console.print("[bold]Pending writes[/]: none")
    return 0
