"""SaverCore: the object a transport holds, one per saver. Its operations are the modules'
functions, bound to it; each returns a generator of requests for the transport to drive."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
)

from . import indexes, jobs, kept, reads
from . import writes as write_ops  # (put_writes has an argument named writes)
from .requests import Op, Stream
from .state import CoreState


@dataclass(frozen=True, slots=True)
class SaverCore(CoreState):
    """A saver's settings, codec, limits and caches (CoreState), with its operations."""

    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> Op[RunnableConfig]:
        return write_ops.put(self, config, checkpoint, metadata, new_versions)

    def put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> Op[None]:
        return write_ops.put_writes(self, config, writes, task_id, task_path)

    def get_tuple(self, config: RunnableConfig) -> Op[CheckpointTuple | None]:
        return reads.get_tuple(self, config)

    def list_checkpoints(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> Stream:
        return reads.list_checkpoints(self, config, filter=filter, before=before, limit=limit)

    def register_metadata_index(self) -> Op[None]:
        return indexes.register_metadata_index(self)

    def reindex_metadata(self) -> Op[int]:
        return indexes.reindex_metadata(self)

    def delete_thread(self, thread_id: str) -> Op[None]:
        return jobs.delete_thread(self, thread_id)

    def delete_for_runs(self, run_ids: Sequence[str]) -> Op[None]:
        return jobs.delete_for_runs(self, run_ids)

    def prune(self, thread_ids: Sequence[str], strategy: str = "keep_latest") -> Op[None]:
        return jobs.prune(self, thread_ids, strategy)

    def set_thread_ttl(self, thread_id: str, seconds: int | None) -> Op[None]:
        return jobs.set_thread_ttl(self, thread_id, seconds)

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> Op[None]:
        return jobs.copy_thread(self, source_thread_id, target_thread_id)

    def get_kept_checkpoint(
        self, thread_id: str, ns: str, checkpoint_id: str
    ) -> Op[CheckpointTuple | None]:
        return kept.get_kept_checkpoint(self, thread_id, ns, checkpoint_id)

    def get_write_paths(
        self, thread_id: str, ns: str, checkpoint_ids: Sequence[str]
    ) -> Op[dict[tuple[str, str, str], str]]:
        return kept.get_write_paths(self, thread_id, ns, checkpoint_ids)
