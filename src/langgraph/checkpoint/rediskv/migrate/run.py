"""The copy: :func:`migrate` walks the source's threads, copies each namespace's
checkpoints and pending writes into the target, and verifies them."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from langgraph.checkpoint.base import BaseCheckpointSaver, CheckpointTuple

from ..sync import RedisSaver
from .common import WriteKey, config_for, id_of, ns_of, target_form
from .report import MigrationReport, ThreadReport
from .source import Source
from .verify import delta_differences, verify_thread


def _copy_namespace(
    target: RedisSaver,
    thread_id: str,
    ns: str,
    items: Sequence[CheckpointTuple],
    paths: dict[WriteKey, str],
    on_checkpoint: Callable[[], None] | None,
) -> None:
    for item in items:
        checkpoint = target_form(item.checkpoint)
        values = checkpoint.get("channel_values") or {}
        channel_versions = checkpoint.get("channel_versions") or {}
        versions = {ch: channel_versions[ch] for ch in values if ch in channel_versions}
        parent_id = (item.parent_config or {}).get("configurable", {}).get("checkpoint_id")
        config = config_for(thread_id, ns, parent_id or None)
        stored = target.put(config, checkpoint, item.metadata, versions)
        by_task: dict[str, list[tuple[str, Any]]] = {}
        for task_id, channel, value in item.pending_writes or []:
            by_task.setdefault(task_id, []).append((channel, value))
        cid = id_of(item)
        for task_id, writes in by_task.items():
            target.put_writes(stored, writes, task_id, paths.get((ns, cid, task_id), ""))
        if on_checkpoint is not None:
            on_checkpoint()


def migrate(
    source: Source | BaseCheckpointSaver[Any],
    target: RedisSaver,
    *,
    threads: Iterable[str] | None = None,
    dry_run: bool = False,
    verify: bool = True,
    recopy: bool = False,
    on_thread: Callable[[ThreadReport], None] | None = None,
    on_checkpoint: Callable[[], None] | None = None,
) -> MigrationReport:
    """Copy threads from ``source`` into ``target`` (see the module's documentation).

    Args:
        source: a :class:`Source` (from :func:`open_source`) or any saver with the
            synchronous API (its threads are found with ``list(None)``).
        target: the saver to copy into; one without ``keep_last`` keeps every checkpoint.
        threads: only these thread ids (default: every thread of the source).
        dry_run: read both sides and report what would be copied; write nothing.
        verify: read every thread back from both sides after copying it (and check the
            threads found present).
        recopy: copy threads that are present in the target too (puts replace by id).
        on_thread: called with each thread's report when it is done (progress).
        on_checkpoint: called after each checkpoint copied (progress).
    """
    src = source if isinstance(source, Source) else Source(source)
    began = time.monotonic()
    report = MigrationReport(source=src.name, dry_run=dry_run)
    thread_ids = list(dict.fromkeys(threads)) if threads is not None else src.thread_ids()
    for thread_id in thread_ids:
        entry = ThreadReport(thread_id, "failed")
        try:
            _migrate_thread(src, target, entry, dry_run=dry_run, verify=verify, recopy=recopy,
                            on_checkpoint=on_checkpoint)  # fmt: skip
        except Exception as exc:
            entry.status = "failed"
            entry.problems.append(f"{type(exc).__name__}: {exc}")
        report.threads.append(entry)
        if on_thread is not None:
            on_thread(entry)
    report.seconds = time.monotonic() - began
    return report


def _migrate_thread(
    src: Source,
    target: RedisSaver,
    entry: ThreadReport,
    *,
    dry_run: bool,
    verify: bool,
    recopy: bool,
    on_checkpoint: Callable[[], None] | None,
) -> None:
    thread_id = entry.thread_id
    namespaces = src.namespaces(thread_id)
    if not namespaces:
        entry.problems.append("no checkpoints in the source")
        return
    listed = {ns: src.checkpoints(thread_id, ns) for ns in namespaces}
    copied = {
        ns: sorted([*items, *src.delta_ancestors(thread_id, ns, items)], key=id_of)
        for ns, items in listed.items()
    }
    entry.carried = sum(len(copied[ns]) - len(items) for ns, items in listed.items())
    entry.namespaces = {ns: len(items) for ns, items in copied.items()}
    entry.writes = sum(len(t.pending_writes or []) for items in copied.values() for t in items)
    source_ids = {(ns, id_of(t)) for ns, items in copied.items() for t in items}
    in_target = {
        (ns_of(t), id_of(t)) for t in target.list({"configurable": {"thread_id": thread_id}})
    }
    if in_target - source_ids:
        entry.status = "conflict"
        entry.problems.append(
            f"the target has {len(in_target - source_ids)} checkpoint(s) of this thread that "
            "the source lacks: left alone (delete the thread in the target to copy it again)"
        )
        return
    present = in_target == source_ids
    if dry_run:
        entry.status = "present" if present else "to copy"
        return
    if present and not recopy:
        entry.status = "present"
        if verify:
            entry.problems += delta_differences(src, target, thread_id, copied)
    else:
        paths = src.task_paths(thread_id)
        for ns, items in copied.items():
            _copy_namespace(target, thread_id, ns, items, paths, on_checkpoint)
        entry.status = "copied"
        # (also without verify: a history that could not be carried is not "copied")
        entry.problems += delta_differences(src, target, thread_id, copied)
        if entry.problems:
            entry.status = "incomplete"
    if verify:
        entry.problems += verify_thread(src, target, thread_id, namespaces=namespaces,
                                        copied=copied, delta=False)  # fmt: skip
        entry.verified = not entry.problems
