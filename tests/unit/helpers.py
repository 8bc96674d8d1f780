"""Checkpoints and configs for the unit tests (plain data, no core internals)."""

from __future__ import annotations

from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import Checkpoint


def checkpoint_id(n: int) -> str:
    """The n-th id of a thread, in the form of LangGraph's (uuid6: lexical order is time
    order, and id_score() reads its first 13 hex digits)."""
    return f"1ef{n:05x}-0000-6000-8000-000000000000"


def make_checkpoint(
    n: int, values: dict[str, Any] | None = None, versions: dict[str, str] | None = None
) -> Checkpoint:
    values = values or {}
    return {
        "v": 4,
        "id": checkpoint_id(n),
        "ts": f"2026-01-01T00:00:{n % 60:02d}+00:00",
        "channel_values": dict(values),
        "channel_versions": dict(versions or dict.fromkeys(values, "1")),
        "versions_seen": {},
        "updated_channels": None,
    }


def config(thread_id: str, ns: str = "", checkpoint: str | None = None) -> RunnableConfig:
    configurable: dict[str, Any] = {"thread_id": thread_id, "checkpoint_ns": ns}
    if checkpoint is not None:
        configurable["checkpoint_id"] = checkpoint
    return {"configurable": configurable}
