"""Delta channels: the ancestor walk of ``get_delta_channel_history``, free of I/O.

LangGraph's ``DeltaChannel`` stores its value only at some checkpoints (a ``_DeltaSnapshot``
every ``snapshot_frequency`` updates). At the others it stores nothing, and LangGraph rebuilds
the value from the nearest ancestor that stores one (the *seed*) plus the writes stored at that
ancestor and at every ancestor after it, asking the saver for them with
``get_delta_channel_history``. Here the whole walk is one call of
``lua/get_delta_channel_history.lua``; this module builds that call and decodes its reply, in
the style of :mod:`.core.requests` (an operation is a generator of requests).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import DeltaChannelHistory, PendingWrite, get_checkpoint_id

from ..compression import REF_MARK
from ..keys import encode_part
from . import calls
from .requests import Op
from .rules import thread_id_of
from .saver import SaverCore


def get_delta_channel_history(
    core: SaverCore, config: RunnableConfig, channels: Sequence[str]
) -> Op[dict[str, DeltaChannelHistory]]:
    """Per channel: the writes on the path to the checkpoint of ``config`` (the latest of its
    namespace without a ``checkpoint_id``), oldest first and each checkpoint's in
    ``writes_sort_key`` order, and the ``seed`` when an ancestor stores a value.

    The semantics of ``InMemorySaver.get_delta_channel_history``: the target's own writes are
    not included; the seed ancestor's are. With a ttl, the keys read get a fresh expiry (see
    the script's header)."""
    wanted = list(dict.fromkeys(channels))
    if not wanted:
        return {}
    thread_id = thread_id_of(config)
    ns = config["configurable"].get("checkpoint_ns") or ""
    tag = core.keys.tag(thread_id)

    # per channel, one list of writes per contributing ancestor, nearest ancestor first
    found: dict[str, list[list[PendingWrite]]] = {c: [] for c in wanted}
    seeds: dict[str, Any] = {}
    start, resume = get_checkpoint_id(config) or "", "0"
    open_channels = wanted
    cursors: set[str] = set()
    while True:
        reply = yield calls.get_delta_channel_history(
            core.keys.index(tag, ns),
            prefix=core.keys.prefix,
            tag=tag,
            namespace=encode_part(ns),
            checkpoint_id=start,
            resume=resume,
            budget=core.limits.history_budget,
            ttl=core.ttl_seconds,
            channels=open_channels,
        )
        for writes, seed_pairs in reply[1:]:
            step: dict[str, list[PendingWrite]] = {}
            for write in core.codec.pending_writes(writes):  # sorted by writes_sort_key
                step.setdefault(write[1], []).append(write)
            for channel, channel_writes in step.items():
                found[channel].append(channel_writes)
            for position, stored, base in zip(
                seed_pairs[::3], seed_pairs[1::3], seed_pairs[2::3], strict=True
            ):
                if base is None:
                    seeds[open_channels[int(position) - 1]] = core.codec.loads(stored)
                else:  # compressed against a base (see .compression)
                    base_ref = stored[len(REF_MARK) : stored.index(b";")]
                    seeds[open_channels[int(position) - 1]] = core.codec.loads_channel(
                        b"", stored, {base_ref: base}
                    )[0]
        if reply[0] is None:
            break
        start, resume = reply[0].decode(), "1"
        if start in cursors:  # a cycle of parent ids: LangGraph never writes one
            break
        cursors.add(start)
        open_channels = [c for c in open_channels if c not in seeds]

    result: dict[str, DeltaChannelHistory] = {}
    for channel in wanted:
        entry: DeltaChannelHistory = {
            "writes": [w for step_writes in reversed(found[channel]) for w in step_writes]
        }
        if channel in seeds:
            entry["seed"] = seeds[channel]
        result[channel] = entry
    return result
