"""What the migration reads of a ``CheckpointTuple`` (its namespace, id, parent, delta
channels), the config that names a checkpoint, and the form a checkpoint is copied in."""

from __future__ import annotations

import itertools
from typing import Any, cast

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import Checkpoint, CheckpointTuple

WriteKey = tuple[str, str, str]  # (namespace, checkpoint id, task id)


def config_for(thread_id: str, ns: str, checkpoint_id: str | None = None) -> RunnableConfig:
    configurable: dict[str, Any] = {"thread_id": thread_id, "checkpoint_ns": ns}
    if checkpoint_id is not None:
        configurable["checkpoint_id"] = checkpoint_id
    return {"configurable": configurable}


def ns_of(item: CheckpointTuple) -> str:
    return str(item.config["configurable"].get("checkpoint_ns") or "")


def id_of(item: CheckpointTuple) -> str:
    return str(item.config["configurable"]["checkpoint_id"])


def parent_id_of(item: CheckpointTuple) -> str | None:
    parent = (item.parent_config or {}).get("configurable", {}).get("checkpoint_id")
    return str(parent) if parent else None


def delta_channels_of(item: CheckpointTuple) -> list[str]:
    """The DeltaChannels of a checkpoint: LangGraph counts their updates since their last
    snapshot in its metadata (absent when the graph has none)."""
    counters = (item.metadata or {}).get("counters_since_delta_snapshot") or {}
    return sorted(str(channel) for channel in counters)


def _version(value: Any) -> Any:
    # an int version (plainredis, BaseCheckpointSaver's default) as this saver writes them:
    # a graph that goes on with the copy compares its new versions with the stored ones
    if isinstance(value, int) and not isinstance(value, bool):
        return f"{value:016}.00000000"
    return value


def target_form(checkpoint: Checkpoint) -> Checkpoint:
    """The checkpoint as it is copied: integer channel versions (in ``channel_versions``
    and ``versions_seen``) as strings of this saver's form, their order kept."""
    versions = checkpoint.get("channel_versions") or {}
    seen = checkpoint.get("versions_seen") or {}
    if not any(
        isinstance(v, int)
        for v in itertools.chain(versions.values(), *map(dict.values, seen.values()))
    ):
        return checkpoint
    copy = dict(checkpoint)
    copy["channel_versions"] = {ch: _version(v) for ch, v in versions.items()}
    copy["versions_seen"] = {
        node: {ch: _version(v) for ch, v in channels.items()} for node, channels in seen.items()
    }
    return cast(Checkpoint, copy)
