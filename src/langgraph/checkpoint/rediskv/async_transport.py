"""The transport, written once: what drives the core's requests over an asyncio redis-py
client. ``sync_transport.py`` is generated from this file by ``scripts/unasync.py``; edit
this one and run the script (``--check`` says whether the generated file is current).
What really differs between the savers (threads or an event loop, the auto pipeline, the
context managers, the locks) stays in ``aio.py`` and ``sync.py``."""

from __future__ import annotations

import builtins
from collections.abc import AsyncIterator, Mapping, Sequence
from datetime import timedelta
from typing import Any, TypeVar

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    DeltaChannelHistory,
)

from .async_calls import AsyncCalls
from .core.check import Problem, check_store
from .core.delta import get_delta_channel_history
from .eviction import acheck_policy_once
from .settings import ttl_seconds

T = TypeVar("T")


class AsyncTransport(AsyncCalls):
    """The saver's requests over its client: script calls (as FCALLs of the saver's library
    where it can), batches, scans, cluster routing, waits for replicas; and the checkpointer
    methods, each one operation of the core driven to its end."""

    # -- the checkpointer contract ----------------------------------------------------------
    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """The checkpoint that ``config`` names, with its pending writes.

        Args:
            config: ``{"configurable": {"thread_id": ..., "checkpoint_ns": ...}}``, with
                ``checkpoint_id`` for one checkpoint, without it for the thread's latest.

        Returns:
            The checkpoint tuple, or None when there is no such checkpoint.

        Raises:
            RedisUnavailableError: the server could not be reached.
            CheckpointLostError: the checkpoint lost a value or its record to the server's
                eviction (see the saver's ``on_lost_checkpoint``).
            ValueError: ``config`` names no thread.
        """
        return await self._run(self._core.get_tuple(config))

    def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        """Checkpoints, newest first, read a page at a time as the caller iterates.

        Args:
            config: a thread (and optionally a namespace and ``checkpoint_id``); None for
                every thread under the saver's prefix.
            filter: metadata values every checkpoint listed must have.
            before: only checkpoints older than the one this config names.
            limit: at most this many checkpoints.

        Returns:
            An iterator of checkpoint tuples.

        Raises:
            RedisUnavailableError: the server could not be reached.
        """
        return self._stream(
            self._core.list_checkpoints(config, filter=filter, before=before, limit=limit)
        )

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """Store a checkpoint and the channel values that changed, in one script call.

        Args:
            config: the thread and namespace, and the parent checkpoint's id if any.
            checkpoint: the checkpoint to store.
            metadata: its metadata (the indexed keys are indexed too).
            new_versions: the channels whose values this checkpoint writes.

        Returns:
            The config of the stored checkpoint.

        Raises:
            RedisUnavailableError: the server could not be reached.
            ReplicationError: with ``wait_for_replicas``, fewer replicas acknowledged it.
            ValueError: a value larger than the server accepts.
        """
        return await self._run(self._core.put(config, checkpoint, metadata, new_versions))

    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        """Store a task's pending writes for the checkpoint ``config`` names.

        Args:
            config: the checkpoint's config (as ``aput`` returned it).
            writes: ``(channel, value)`` pairs.
            task_id: the task that wrote them.
            task_path: the task's path in the graph.

        Returns:
            None.

        Raises:
            RedisUnavailableError: the server could not be reached.
            ReplicationError: with ``wait_for_replicas``, fewer replicas acknowledged it.
        """
        await self._run(self._core.put_writes(config, writes, task_id, task_path))

    async def adelete_thread(self, thread_id: str) -> None:
        """Delete every checkpoint, write and value of a thread, in every namespace.

        Args:
            thread_id: the thread.

        Returns:
            None.

        Raises:
            RedisUnavailableError: the server could not be reached.
        """
        await self._run(self._core.delete_thread(thread_id))

    async def adelete_for_runs(self, run_ids: Sequence[str]) -> None:
        """Delete the checkpoints whose metadata names one of these runs.

        Args:
            run_ids: the runs' ids.

        Returns:
            None.

        Raises:
            RedisUnavailableError: the server could not be reached.
        """
        await self._run(self._core.delete_for_runs(run_ids))

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """Copy a thread's checkpoints and writes into another thread.

        Args:
            source_thread_id: the thread copied.
            target_thread_id: the thread it is copied into.

        Returns:
            None.

        Raises:
            RedisUnavailableError: the server could not be reached.
        """
        await self._run(self._core.copy_thread(source_thread_id, target_thread_id))

    async def aprune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        """Remove old checkpoints of these threads.

        Args:
            thread_ids: the threads.
            strategy: ``"keep_latest"`` keeps each namespace's latest checkpoint;
                ``"delete"`` removes the threads.

        Returns:
            None.

        Raises:
            RedisUnavailableError: the server could not be reached.
            ValueError: an unknown strategy.
        """
        await self._run(self._core.prune(thread_ids, strategy))

    async def acheck_invariants(self) -> builtins.list[Problem]:
        """Every inconsistency among the keys of this saver's prefix.

        Returns:
            The problems found; empty when the store is sound.

        Raises:
            RedisUnavailableError: the server could not be reached.
        """
        return await self._run(check_store(self._core))

    async def areindex_metadata(self) -> int:
        """Build the global metadata indexes over the checkpoints already stored: needed once
        after adding a key to ``index_metadata`` on a store that has threads (until then,
        ``list(None, filter=...)`` on that key scans the threads). Visits every thread in
        bounded steps.

        Returns:
            The number of index entries added.

        Raises:
            RedisUnavailableError: the server could not be reached.
        """
        return await self._run(self._core.reindex_metadata())

    # -- per-thread expiry -------------------------------------------------------------------
    async def aset_thread_ttl(self, thread_id: str, ttl: float | timedelta) -> None:
        """Give one thread its own expiry, whatever the default.

        Args:
            thread_id: the thread.
            ttl: minutes, or a timedelta.

        Returns:
            None.

        Raises:
            RedisUnavailableError: the server could not be reached.
            ValueError: a ttl that is not a positive duration.
        """
        if self._core.ttl is None and not self._thread_ttl_checked:
            # the thread's keys now expire, so a volatile-* policy can evict them
            self._thread_ttl_checked = True
            await acheck_policy_once(self._client, True, volatile_only=True)
        await self._run(self._core.set_thread_ttl(thread_id, ttl_seconds(ttl)))

    async def apin_thread(self, thread_id: str) -> None:
        """Keep one thread forever: none of its keys expire until it is unpinned.

        Args:
            thread_id: the thread.

        Returns:
            None.

        Raises:
            RedisUnavailableError: the server could not be reached.
        """
        await self._run(self._core.set_thread_ttl(thread_id, 0))

    async def aunpin_thread(self, thread_id: str) -> None:
        """Return a pinned (or own-ttl) thread to the saver's default expiry.

        Args:
            thread_id: the thread.

        Returns:
            None.

        Raises:
            RedisUnavailableError: the server could not be reached.
        """
        await self._run(self._core.set_thread_ttl(thread_id, None))

    async def aget_delta_channel_history(
        self, *, config: RunnableConfig, channels: Sequence[str]
    ) -> Mapping[str, DeltaChannelHistory]:
        """The DeltaChannel ancestor walk, on the server in one script call.

        Args:
            config: the checkpoint the walk starts from.
            channels: the delta channels to rebuild.

        Returns:
            Each channel's history, oldest first.

        Raises:
            RedisUnavailableError: the server could not be reached.
        """
        return await self._run(get_delta_channel_history(self._core, config, channels))
