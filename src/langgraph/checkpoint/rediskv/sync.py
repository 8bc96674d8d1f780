"""``RedisSaver``: the core driven over a synchronous redis-py client."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import contextmanager
from types import TracebackType
from typing import Any, TypeVar

import redis
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    SerializerProtocol,
)

from .base import (
    CONNECT_TIMEOUT,
    MAX_CONNECTIONS,
    POOL_TIMEOUT,
    UNAVAILABLE,
    RedisSaverBase,
)
from .core import Batch, Op, Request, ScanPage, ScriptCall, Stream
from .scripts import script_sources

T = TypeVar("T")


class RedisSaver(RedisSaverBase):
    """LangGraph checkpointer on plain Redis or Valkey, synchronous.

    Args:
        url: ``redis://``, ``rediss://`` or ``unix://`` URL; defaults to ``$REDIS_URL``, then
            ``redis://localhost:6379/0``. Ignored when ``client`` is given.
        client: your own ``redis.Redis``; the saver never closes it.
        prefix: first part of every key, so several savers can share one database.
        ttl: ``{"default_ttl": minutes | timedelta, "refresh_on_read": bool}`` to let idle
            threads expire; ``None`` keeps everything.
        serde: serializer (LangGraph's JsonPlusSerializer by default).
        max_connections: size of the blocking connection pool the saver creates.

    The async methods (``aput`` ...) run the sync ones in a worker thread.
    """

    def __init__(
        self,
        url: str | None = None,
        *,
        client: redis.Redis | None = None,
        prefix: str = "lg",
        ttl: Any = None,
        serde: SerializerProtocol | None = None,
        max_connections: int = MAX_CONNECTIONS,
        pool_timeout: float = POOL_TIMEOUT,
        connect_timeout: float = CONNECT_TIMEOUT,
    ) -> None:
        connect_url = self._setup(url, client, prefix, ttl, serde)
        if connect_url is not None:
            pool = redis.BlockingConnectionPool.from_url(
                connect_url,
                max_connections=max_connections,
                timeout=pool_timeout,
                socket_connect_timeout=connect_timeout,
            )
            client = redis.Redis(connection_pool=pool)
        assert client is not None
        self._client: redis.Redis = client
        self._scripts = {
            name: client.register_script(source) for name, source in script_sources().items()
        }

    @classmethod
    @contextmanager
    def from_conn_string(cls, url: str | None = None, **kwargs: Any) -> Iterator[RedisSaver]:
        saver = cls(url, **kwargs)
        try:
            yield saver
        finally:
            saver.close()

    @property
    def client(self) -> redis.Redis:
        return self._client

    def close(self) -> None:
        """Close the connections the saver opened (never a client passed in)."""
        if self._owns_client:
            self._client.close()
            self._client.connection_pool.disconnect()

    def __enter__(self) -> RedisSaver:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # -- transport -----------------------------------------------------------------------
    def _send(self, request: Request) -> Any:
        try:
            if isinstance(request, ScriptCall):
                return self._scripts[request.name](keys=request.keys, args=request.args)
            if isinstance(request, ScanPage):
                return self._client.scan(request.cursor, match=request.match, count=request.count)
            pipe = self._client.pipeline(transaction=False)
            for call in request.calls:
                self._scripts[call.name](keys=call.keys, args=call.args, client=pipe)
            return pipe.execute()
        except UNAVAILABLE as exc:
            raise self._unavailable(exc) from exc

    def _run(self, op: Op[T]) -> T:
        reply: Any = None
        try:
            while True:
                reply = self._send(op.send(reply))
        except StopIteration as done:
            return done.value  # type: ignore[no-any-return]

    def _stream(self, stream: Stream) -> Iterator[CheckpointTuple]:
        reply: Any = None
        while True:
            try:
                item = stream.send(reply)
            except StopIteration:
                return
            if isinstance(item, CheckpointTuple):
                reply = None
                yield item
            else:
                reply = self._send(item)

    # -- the checkpointer contract ----------------------------------------------------------
    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        return self._run(self._core.get_tuple(config))

    def list(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:
        return self._stream(self._core.list(config, filter=filter, before=before, limit=limit))

    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        return self._run(self._core.put(config, checkpoint, metadata, new_versions))

    def put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        self._run(self._core.put_writes(config, writes, task_id, task_path))

    def delete_thread(self, thread_id: str) -> None:
        self._run(self._core.delete_thread(thread_id))

    def delete_for_runs(self, run_ids: Sequence[str]) -> None:
        self._run(self._core.delete_for_runs(run_ids))

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        self._run(self._core.copy_thread(source_thread_id, target_thread_id))

    def prune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        self._run(self._core.prune(thread_ids, strategy))

    # -- async API: the sync calls, run in a worker thread ------------------------------------
    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        return await asyncio.to_thread(self.get_tuple, config)

    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        def collect() -> list[CheckpointTuple]:
            return list(self.list(config, filter=filter, before=before, limit=limit))

        for item in await asyncio.to_thread(collect):
            yield item

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        return await asyncio.to_thread(self.put, config, checkpoint, metadata, new_versions)

    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        await asyncio.to_thread(self.put_writes, config, writes, task_id, task_path)

    async def adelete_thread(self, thread_id: str) -> None:
        await asyncio.to_thread(self.delete_thread, thread_id)

    async def adelete_for_runs(self, run_ids: Sequence[str]) -> None:
        await asyncio.to_thread(self.delete_for_runs, run_ids)

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        await asyncio.to_thread(self.copy_thread, source_thread_id, target_thread_id)

    async def aprune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        await asyncio.to_thread(self.prune, thread_ids, strategy=strategy)
