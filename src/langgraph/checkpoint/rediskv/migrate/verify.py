"""Comparing a thread in the source and in the target: every checkpoint, its metadata,
parent and pending writes, the listing, the latest, and the history delta channels are
rebuilt from."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langgraph.checkpoint.base import (
    BaseCheckpointSaver,
    CheckpointTuple,
    get_serializable_checkpoint_metadata,
)

from ..sync import RedisSaver
from .common import config_for, delta_channels_of, id_of, ns_of, parent_id_of, target_form
from .source import Source


def _same(a: Any, b: Any, serde: Any) -> bool:
    """Equal, or (for objects without a useful ``==``) serialized the same way."""
    try:
        if a == b:
            return True
    except Exception:
        pass
    try:
        return bool(serde.dumps_typed(a) == serde.dumps_typed(b))
    except Exception:
        return False


def _writes_key(write: Any) -> tuple[str, str]:
    return (str(write[0]), str(write[1]))


def _differences(
    source: CheckpointTuple, target: CheckpointTuple | None, serde: Any, ordered: bool = True
) -> list[str]:
    if target is None:
        return ["missing in the target"]
    found = []
    src_cp: dict[str, Any] = dict(target_form(source.checkpoint))
    dst_cp: dict[str, Any] = dict(target.checkpoint)
    src_values: dict[str, Any] = src_cp.pop("channel_values", None) or {}
    dst_values: dict[str, Any] = dst_cp.pop("channel_values", None) or {}
    if set(src_values) != set(dst_values):
        found.append(f"channels {sorted(src_values)} != {sorted(dst_values)}")
    found += [
        f"value of channel {ch!r} differs"
        for ch in sorted(set(src_values) & set(dst_values))
        if not _same(src_values[ch], dst_values[ch], serde)
    ]
    src_cp.pop("pending_sends", None)  # legacy (v < 4): read back as writes of the parent
    dst_cp.pop("pending_sends", None)
    for key in sorted(set(src_cp) | set(dst_cp)):
        if not _same(src_cp.get(key), dst_cp.get(key), serde):
            found.append(f"checkpoint field {key!r} differs")
    expected_metadata = get_serializable_checkpoint_metadata({}, source.metadata)
    if not _same(dict(expected_metadata), dict(target.metadata), serde):
        found.append("metadata differs")
    src_parent = (source.parent_config or {}).get("configurable", {}).get("checkpoint_id")
    dst_parent = (target.parent_config or {}).get("configurable", {}).get("checkpoint_id")
    if (src_parent or None) != (dst_parent or None):
        found.append(f"parent {src_parent!r} != {dst_parent!r}")
    src_writes = list(source.pending_writes or [])
    dst_writes = list(target.pending_writes or [])
    if not ordered:
        src_writes.sort(key=_writes_key)
        dst_writes.sort(key=_writes_key)
    if len(src_writes) != len(dst_writes):
        found.append(f"{len(src_writes)} pending writes != {len(dst_writes)}")
    elif not all(
        w1[0] == w2[0] and w1[1] == w2[1] and _same(w1[2], w2[2], serde)
        for w1, w2 in zip(src_writes, dst_writes, strict=True)
    ):
        found.append("pending writes differ")
    return found


def _history_text(entry: Any) -> str:
    seed = "a seed" if "seed" in entry else "no seed"
    return f"{seed} and {len(entry.get('writes') or [])} writes"


def delta_differences(
    source: Source | BaseCheckpointSaver[Any],
    target: RedisSaver,
    thread_id: str,
    copied: dict[str, list[CheckpointTuple]],
) -> list[str]:
    """Where the target rebuilds a delta channel from other history than the source:
    ``get_delta_channel_history`` on both sides, at the oldest checkpoint of each chain in
    ``copied`` (its parent is not in it) and at the latest of each namespace. The rest of a
    chain holds the same checkpoints and writes on both sides (the verification compares
    them), so it rebuilds the same if its start does. Threads without delta channels cost
    nothing."""
    src = source if isinstance(source, Source) else Source(source)
    serde = target.serde
    problems: list[str] = []
    for ns, items in copied.items():
        ids = {id_of(t) for t in items}
        starts = [t for t in items if parent_id_of(t) not in ids and parent_id_of(t) is not None]
        for item in {id_of(t): t for t in [*starts, *items[-1:]]}.values():
            channels = delta_channels_of(item)
            if not channels:
                continue
            config = config_for(thread_id, ns, id_of(item))
            want = src.saver.get_delta_channel_history(config=config, channels=channels)
            got = target.get_delta_channel_history(config=config, channels=channels)
            for channel in channels:
                a, b = want.get(channel) or {"writes": []}, got.get(channel) or {"writes": []}
                a_writes, b_writes = list(a["writes"]), list(b["writes"])
                if not src.has_task_paths:  # the target orders them by task path, then id
                    a_writes.sort(key=_writes_key)
                    b_writes.sort(key=_writes_key)
                same = (
                    ("seed" in a) == ("seed" in b)
                    and ("seed" not in a or _same(a.get("seed"), b.get("seed"), serde))
                    and len(a_writes) == len(b_writes)
                    and all(
                        w1[0] == w2[0] and w1[1] == w2[1] and _same(w1[2], w2[2], serde)
                        for w1, w2 in zip(a_writes, b_writes, strict=True)
                    )
                )
                if not same:
                    problems.append(
                        f"{thread_id!r} ns {ns!r} checkpoint {id_of(item)}: delta channel "
                        f"{channel!r} is rebuilt from {_history_text(a)} in the source, from "
                        f"{_history_text(b)} in the target (ancestors the source no longer "
                        "gives: its state differs)"
                    )
    return problems


def verify_thread(
    source: Source | BaseCheckpointSaver[Any],
    target: RedisSaver,
    thread_id: str,
    *,
    namespaces: Sequence[str] | None = None,
    copied: dict[str, list[CheckpointTuple]] | None = None,
    delta: bool = True,
) -> list[str]:
    """What differs between the thread in the source and in the target (empty: the same):
    ``list`` of each namespace on both sides (ids and order), each checkpoint through the
    target's ``get_tuple`` and ``list``, the latest checkpoint through both sides'
    ``get_tuple``, and (``delta``) the history delta channels are rebuilt from
    (:func:`delta_differences`). ``copied`` is what was read from the source already (by
    namespace: :meth:`Source.checkpoints_to_copy`)."""
    src = source if isinstance(source, Source) else Source(source)
    serde = target.serde
    ordered = src.has_task_paths
    problems: list[str] = []
    nss = list(namespaces) if namespaces is not None else src.namespaces(thread_id)
    target_nss = {
        ns_of(t) for t in target.list({"configurable": {"thread_id": thread_id}}, limit=None)
    }
    problems += [f"namespace {ns!r} only in the target" for ns in sorted(target_nss - set(nss))]
    read: dict[str, list[CheckpointTuple]] = {}
    for ns in nss:
        where = f"{thread_id!r} ns {ns!r}"
        expected = (copied or {}).get(ns)
        if expected is None:
            expected = src.checkpoints_to_copy(thread_id, ns)
        read[ns] = expected
        listed = list(target.list(config_for(thread_id, ns)))
        src_ids = [id_of(t) for t in reversed(expected)]  # newest first, as list gives them
        dst_ids = [id_of(t) for t in listed]
        if src_ids != dst_ids:
            missing = len(set(src_ids) - set(dst_ids))
            extra = len(set(dst_ids) - set(src_ids))
            problems.append(
                f"{where}: list gives {len(dst_ids)} checkpoints, the source {len(src_ids)} "
                f"({missing} missing, {extra} extra{', order differs' if not missing else ''})"
            )
        by_id = {id_of(t): t for t in listed}
        for item in expected:
            cid = id_of(item)
            got = target.get_tuple(config_for(thread_id, ns, cid))
            problems += [
                f"{where} checkpoint {cid}: {d}" for d in _differences(item, got, serde, ordered)
            ]
            if cid in by_id:
                problems += [
                    f"{where} checkpoint {cid} (list): {d}"
                    for d in _differences(item, by_id[cid], serde, ordered)
                ]
        src_latest = src.latest(thread_id, ns)
        dst_latest = target.get_tuple(config_for(thread_id, ns))
        if src_latest is not None:
            problems += [
                f"{where} latest: {d}" for d in _differences(src_latest, dst_latest, serde, ordered)
            ]
    if delta:
        problems += delta_differences(src, target, thread_id, read)
    return problems
