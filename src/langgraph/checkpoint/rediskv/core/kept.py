"""What a saver keeps without listing it, read for ``migrate``: the checkpoints ``keep_last``
hides because newer ones rebuild their delta channels from them, and the task paths of
pending writes (which list() does not return)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langgraph.checkpoint.base import CheckpointTuple

from ..keys import decode_part, encode_part
from . import calls
from .requests import Op
from .state import CoreState


def get_kept_checkpoint(
    core: CoreState, thread_id: str, ns: str, checkpoint_id: str
) -> Op[CheckpointTuple | None]:
    """A checkpoint by id, also one keep_last hides (lua/get_kept_checkpoint.lua)."""
    tag = core.keys.tag(thread_id)
    record = yield calls.get_kept_checkpoint(
        core.keys.index(tag, ns),
        prefix=core.keys.prefix,
        tag=tag,
        namespace=encode_part(ns),
        checkpoint_id=checkpoint_id,
    )
    return core.codec.decode_record(thread_id, record) if record else None


def get_write_paths(
    core: CoreState, thread_id: str, ns: str, checkpoint_ids: Sequence[str]
) -> Op[dict[tuple[str, str, str], str]]:
    """The task path of each (namespace, checkpoint id, task id) with pending writes among
    ``checkpoint_ids`` of a namespace, hidden checkpoints too (lua/get_write_paths.lua)."""
    tag = core.keys.tag(thread_id)
    reply: Any = yield calls.get_write_paths(
        core.keys.index(tag, ns),
        prefix=core.keys.prefix,
        tag=tag,
        namespace=encode_part(ns),
        checkpoint_ids=checkpoint_ids,
    )
    found: dict[tuple[str, str, str], str] = {}
    for cid, pairs in zip(checkpoint_ids, reply, strict=True):
        for task, path in zip(pairs[::2], pairs[1::2], strict=True):
            found[(ns, cid, decode_part(task.decode()))] = path.decode()
    return found
