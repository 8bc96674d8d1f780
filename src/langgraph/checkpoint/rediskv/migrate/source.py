"""The generic source: any saver with the synchronous API, its threads found with
``list(None)``; the presets (:mod:`.sources_sql`, :mod:`.sources_redis`) derive from it."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langgraph.checkpoint.base import BaseCheckpointSaver, CheckpointTuple

from ..sync import RedisSaver
from .common import WriteKey, config_for, delta_channels_of, id_of, ns_of, parent_id_of


class Source:
    """A saver to copy from, and how to find its threads.

    This generic form works with any saver whose ``list(None)`` lists every checkpoint (the
    in-memory, Postgres, SQLite and plainredis savers do); the presets of
    :func:`open_source` override what their saver does not offer (or offers slowly)."""

    def __init__(self, saver: BaseCheckpointSaver[Any], *, name: str | None = None) -> None:
        self.saver = saver
        self.name = name or type(saver).__name__
        if type(saver).__name__ == "InMemorySaver" or isinstance(saver, RedisSaver):
            self.has_task_paths = True

    def thread_ids(self) -> list[str]:
        """Every thread id of the source, sorted."""
        return sorted({str(t.config["configurable"]["thread_id"]) for t in self.saver.list(None)})

    def namespaces(self, thread_id: str) -> list[str]:
        """The checkpoint namespaces of a thread ("" first)."""
        found = {ns_of(t) for t in self.saver.list({"configurable": {"thread_id": thread_id}})}
        return sorted(found)

    def checkpoints(self, thread_id: str, ns: str) -> list[CheckpointTuple]:
        """Every checkpoint of one namespace of a thread, oldest first."""
        listed = self.saver.list(config_for(thread_id, ns))
        return sorted((t for t in listed if ns_of(t) == ns), key=id_of)

    def latest(self, thread_id: str, ns: str) -> CheckpointTuple | None:
        return self.saver.get_tuple(config_for(thread_id, ns))

    def ancestor(self, thread_id: str, ns: str, checkpoint_id: str) -> CheckpointTuple | None:
        """A checkpoint by id, also one the source keeps without listing it (a rediskv saver
        with keep_last keeps the ancestors of delta channels hidden); None if it has none."""
        if isinstance(self.saver, RedisSaver):
            return self.saver.get_kept_tuple(thread_id, ns, checkpoint_id)
        found = self.saver.get_tuple(config_for(thread_id, ns, checkpoint_id))
        return found if found is not None and id_of(found) == checkpoint_id else None

    def delta_ancestors(
        self, thread_id: str, ns: str, listed: Sequence[CheckpointTuple]
    ) -> list[CheckpointTuple]:
        """The checkpoints the listed ones rebuild their delta channels from that are not
        listed themselves, oldest first: the parent chain of each listed checkpoint whose
        parent is not listed, up to the ancestors that store a value of each such channel
        (or as far as the source gives them). Nothing for a source that lists them all."""
        ids = {id_of(t) for t in listed}
        found: dict[str, CheckpointTuple] = {}
        for item in listed:
            values = item.checkpoint.get("channel_values") or {}
            channels = set(delta_channels_of(item)) - set(values)
            parent = parent_id_of(item)
            while channels and parent is not None and parent not in ids:
                ancestor = found.get(parent) or self.ancestor(thread_id, ns, parent)
                if ancestor is None:  # gone: the check after the copy says what is lost
                    break
                found[parent] = ancestor
                channels -= set(ancestor.checkpoint.get("channel_values") or {})
                parent = parent_id_of(ancestor)
        return sorted(found.values(), key=id_of)

    def checkpoints_to_copy(self, thread_id: str, ns: str) -> list[CheckpointTuple]:
        """The listed checkpoints and their :meth:`delta_ancestors`, oldest first."""
        listed = self.checkpoints(thread_id, ns)
        return sorted([*listed, *self.delta_ancestors(thread_id, ns, listed)], key=id_of)

    # whether task_paths() knows them: if not, pending writes are compared regardless of
    # their order (the target orders them by task path, then task id)
    has_task_paths = False

    def task_paths(self, thread_id: str) -> dict[WriteKey, str]:
        """The task path of each (namespace, checkpoint id, task id) with pending writes,
        where the source stores it; missing ones are copied as ``""``."""
        from langgraph.checkpoint.memory import InMemorySaver

        if isinstance(self.saver, RedisSaver):
            return {
                key: path
                for ns in self.namespaces(thread_id)
                for key, path in self.saver.get_task_paths(thread_id, ns).items()
            }
        if not isinstance(self.saver, InMemorySaver):
            return {}
        return {
            (ns, cid, task_id): path
            for (tid, ns, cid), writes in self.saver.writes.items()
            if tid == thread_id
            for task_id, _channel, _value, path in writes.values()
        }

    def close(self) -> None:
        """Release what :func:`open_source` opened (nothing for a saver given directly)."""
