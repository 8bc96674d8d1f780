"""What a rediskv source keeps without listing it: the checkpoints ``keep_last`` hides
because newer ones rebuild their delta channels from them, and the task paths of pending
writes (read with its Lua scripts)."""

from __future__ import annotations

from typing import Any, cast

from langgraph.checkpoint.base import CheckpointTuple

from ..sync import RedisSaver
from .common import WriteKey


def kept_checkpoint(
    saver: RedisSaver, thread_id: str, ns: str, checkpoint_id: str
) -> CheckpointTuple | None:
    """A checkpoint of a rediskv saver by id, also one keep_last hides because newer ones
    rebuild their delta channels from it (lua/get_kept_checkpoint.lua)."""
    from ..core import ScriptCall
    from ..keys import encode_part

    core = saver._core
    tag = core.keys.tag(thread_id)

    def read() -> Any:
        record = yield ScriptCall(
            "get_kept_checkpoint",
            (core.keys.index(tag, ns),),
            (core.keys.prefix, tag, encode_part(ns), checkpoint_id),
        )
        return core.codec.decode_record(thread_id, record) if record else None

    return cast(CheckpointTuple | None, saver._run(read()))


# checkpoint ids per get_write_paths call
WRITE_PATHS_BATCH = 500


def rediskv_task_paths(saver: RedisSaver, thread_id: str, ns: str) -> dict[WriteKey, str]:
    """The task paths of the pending writes of every checkpoint of a namespace of a rediskv
    saver, hidden ones too (lua/get_write_paths.lua)."""
    from ..core import ScriptCall
    from ..keys import decode_part, encode_part

    core = saver._core
    tag = core.keys.tag(thread_id)
    index = core.keys.index(tag, ns)
    ids = [
        i.decode() if isinstance(i, bytes) else str(i) for i in saver.client.zrange(index, 0, -1)
    ]
    found: dict[WriteKey, str] = {}
    for start in range(0, len(ids), WRITE_PATHS_BATCH):
        chunk = ids[start : start + WRITE_PATHS_BATCH]

        def read(chunk: list[str] = chunk) -> Any:
            args = (core.keys.prefix, tag, encode_part(ns), *chunk)
            return (yield ScriptCall("get_write_paths", (index,), args))

        for cid, pairs in zip(chunk, saver._run(read()), strict=True):
            for task, path in zip(pairs[::2], pairs[1::2], strict=True):
                found[(ns, cid, decode_part(task.decode()))] = path.decode()
    return found
