"""``AsyncRedisSaver``: the core driven over an asyncio redis-py client (the transport
itself is ``async_transport.py``; here what only the async saver does)."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import AsyncIterator, Awaitable, Iterator, Mapping, Sequence
from contextlib import asynccontextmanager
from types import TracebackType
from typing import Any, TypeVar

import redis.asyncio as aredis
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    DeltaChannelHistory,
)
from redis.asyncio.cluster import RedisCluster as AsyncRedisCluster
from redis.asyncio.retry import Retry
from redis.exceptions import RedisClusterException

from .async_transport import AsyncTransport
from .autopipeline import AutoPipeline
from .base import (
    documented_as,
    retry_backoff,
)
from .core import LIST_PAGE, Request, ScriptCall
from .options import CONNECT_TIMEOUT, MAX_CONNECTIONS, RETRIES, SOCKET_TIMEOUT
from .packing import pack_in_c

T = TypeVar("T")

FROM_THREAD = "{name} from a thread other than the event loop's."
ON_LOOP = (
    "asyncio.InvalidStateError: called from the saver's event loop's thread, or before "
    "any async call"
)


def async_cluster_client(url: str, **options: Any) -> AsyncRedisCluster:
    """An asyncio client of the Redis Cluster that ``url`` names a node of, opened as
    ``AsyncRedisSaver(url, cluster=True)`` opens its own (the store opens its so too): the
    saver's pool size (per node), timeouts and retries unless ``options`` (redis-py's) say
    otherwise. It connects at its first call (``await client.initialize()``: now)."""
    options = {
        "max_connections": MAX_CONNECTIONS,
        "socket_connect_timeout": CONNECT_TIMEOUT,
        "socket_timeout": SOCKET_TIMEOUT,
        "retry": Retry(retry_backoff(), RETRIES),
        **options,
    }
    return AsyncRedisCluster.from_url(url, **options)


class AsyncRedisSaver(AsyncTransport):
    """LangGraph checkpointer on plain Redis or Valkey, for asyncio.

    Takes the same arguments as :class:`RedisSaver`; ``client`` is a ``redis.asyncio.Redis``
    or ``redis.asyncio.cluster.RedisCluster``. On a cluster, ``max_connections`` bounds each
    node's connections (redis-py's async cluster client fails rather than waits past it).
    With ``auto_pipeline`` (the default, standalone servers), script calls that concurrent
    graphs make in the same turn of the event loop are sent in one pipeline.
    The sync methods work from threads other than the event loop's (as in LangGraph's
    AsyncPostgresSaver), e.g. for ``graph.get_state`` called from a worker thread.
    """

    def _connect(
        self, url: str, cluster: bool, pool_timeout: float, retries: int, options: dict[str, Any]
    ) -> aredis.Redis | AsyncRedisCluster:
        if cluster:
            return async_cluster_client(url, **options)
        pool = aredis.BlockingConnectionPool.from_url(
            url, **{"timeout": pool_timeout, "retry_on_timeout": retries > 0, **options}
        )
        pack_in_c(pool)
        return aredis.Redis(connection_pool=pool)

    def _start_async(self, max_connections: int, auto_pipeline: bool) -> None:
        self._loop: asyncio.AbstractEventLoop | None = None
        # redis-py's async cluster client fails with MaxConnectionsError past max_connections
        # on a node; callers wait at this gate instead, as they do at a blocking pool.
        self._cluster_gate = (
            asyncio.Semaphore(max_connections)
            if isinstance(self._client, AsyncRedisCluster)
            else None
        )
        self._cluster_ready = False
        self._pipeline = (
            AutoPipeline(self._client, self._scripts, self._library, self._script)
            if auto_pipeline and isinstance(self._client, aredis.Redis)
            else None
        )

    @classmethod
    @asynccontextmanager
    async def from_conn_string(
        cls, url: str | None = None, **kwargs: Any
    ) -> AsyncIterator[AsyncRedisSaver]:
        """A saver that is closed when the ``async with`` block ends.

        Args:
            url: as for :class:`AsyncRedisSaver`.
            **kwargs: any other argument of :class:`AsyncRedisSaver`.

        Returns:
            An async context manager that yields the saver.

        Raises:
            ValueError: an argument the saver does not take, or a bad value.
        """
        saver = cls(url, **kwargs)
        try:
            yield saver
        finally:
            await saver.aclose()

    @documented_as(AsyncTransport.asetup, FROM_THREAD, ON_LOOP)
    def setup(self) -> None:
        self._on_loop(self.asetup())

    @property
    def client(self) -> aredis.Redis | AsyncRedisCluster:
        """The redis-py client the saver uses (its own, or the one passed in)."""
        return self._client

    async def aclose(self) -> None:
        """Close the connections the saver opened (never a client passed in).

        Returns:
            None.

        Raises:
            Nothing: redis-py's errors while closing are its own.
        """
        if self._owns_client:
            await self._client.aclose()
            if isinstance(self._client, aredis.Redis):  # its pool was handed in: close it too
                await self._client.connection_pool.disconnect()

    async def __aenter__(self) -> AsyncRedisSaver:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    # -- what the transport leaves to the async saver ---------------------------------------
    def _node_lock(self, node: str) -> asyncio.Lock:
        """One lock per cluster primary (one task at a time checks its library)."""
        return self._node_locks.setdefault(node, asyncio.Lock())

    async def _send(self, request: Request) -> Any:
        if self._cluster_gate is None:
            return await super()._send(request)
        async with self._cluster_gate:
            if not self._cluster_ready:
                # Learn the topology before the first burst: a fresh async cluster client
                # that many tasks use at once breaks its own connections (redis-py 8.1).
                try:
                    await self._client.initialize()
                except RedisClusterException as exc:
                    self._raise_translated(exc)
                self._cluster_ready = True
            return await super()._send(request)

    async def _script_call(self, call: ScriptCall, large: bool) -> Any:
        if self._pipeline is not None:  # (calls of the same turn of the loop: one pipeline)
            return await self._pipeline.call(call, large)
        return await super()._script_call(call, large)

    def _bind_loop(self) -> None:
        """The saver's connections belong to the event loop that first used them: a call
        from another loop would hang or fail deep inside redis-py, so it fails here, clearly."""
        loop = asyncio.get_running_loop()
        if self._loop is not None and self._loop is not loop:
            raise RuntimeError(
                "this AsyncRedisSaver was first used on another event loop"
                + (" (since closed)" if self._loop.is_closed() else "")
                + ", and its connections belong to that loop: create one saver per event loop "
                "(for example inside the asyncio.run() that uses it), or use RedisSaver from "
                "threads"
            )
        self._loop = loop

    # -- sync API: the async calls, run on the saver's event loop from another thread ---------
    def _on_loop(self, awaitable: Awaitable[T]) -> T:
        """Run ``awaitable`` on the saver's event loop from another thread; its result."""
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        refused = (running is not None and running is self._loop) or (
            self._loop is None or self._loop.is_closed()
        )
        if refused and inspect.iscoroutine(awaitable):
            awaitable.close()  # never awaited: close it, or Python warns when it is collected
        if running is not None and running is self._loop:
            raise asyncio.InvalidStateError(
                "synchronous calls to AsyncRedisSaver are only allowed from a thread other than "
                "its event loop's; there, use the async methods (await saver.aget_tuple(...), "
                "await graph.ainvoke(...))"
            )
        if self._loop is None or self._loop.is_closed():
            raise asyncio.InvalidStateError(
                "AsyncRedisSaver has no running event loop yet: call an async method first, or "
                "use RedisSaver for synchronous code"
            )
        return asyncio.run_coroutine_threadsafe(awaitable, self._loop).result()  # type: ignore[arg-type]

    @documented_as(AsyncTransport.aget_tuple, FROM_THREAD, ON_LOOP)
    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        return self._on_loop(self.aget_tuple(config))

    @documented_as(AsyncTransport.alist, FROM_THREAD, ON_LOOP)
    def list(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:
        # a page at a time, each read on the saver's loop: a listing's memory stays bounded
        # (the first at once, so that a call from the wrong thread fails here)
        listing = self.alist(config, filter=filter, before=before, limit=limit)

        async def more() -> list[CheckpointTuple]:
            page: list[CheckpointTuple] = []
            async for item in listing:
                page.append(item)
                if len(page) == LIST_PAGE:
                    break
            return page

        def pages(page: list[CheckpointTuple]) -> Iterator[CheckpointTuple]:
            while True:
                yield from page
                if len(page) < LIST_PAGE:
                    return
                page = self._on_loop(more())

        return pages(self._on_loop(more()))

    @documented_as(AsyncTransport.aput, FROM_THREAD, ON_LOOP)
    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        return self._on_loop(self.aput(config, checkpoint, metadata, new_versions))

    @documented_as(AsyncTransport.aput_writes, FROM_THREAD, ON_LOOP)
    def put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        self._on_loop(self.aput_writes(config, writes, task_id, task_path))

    @documented_as(AsyncTransport.adelete_thread, FROM_THREAD, ON_LOOP)
    def delete_thread(self, thread_id: str) -> None:
        self._on_loop(self.adelete_thread(thread_id))

    @documented_as(AsyncTransport.adelete_for_runs, FROM_THREAD, ON_LOOP)
    def delete_for_runs(self, run_ids: Sequence[str]) -> None:
        self._on_loop(self.adelete_for_runs(run_ids))

    @documented_as(AsyncTransport.acopy_thread, FROM_THREAD, ON_LOOP)
    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        self._on_loop(self.acopy_thread(source_thread_id, target_thread_id))

    @documented_as(AsyncTransport.aprune, FROM_THREAD, ON_LOOP)
    def prune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        self._on_loop(self.aprune(thread_ids, strategy=strategy))

    @documented_as(AsyncTransport.aget_delta_channel_history, FROM_THREAD, ON_LOOP)
    def get_delta_channel_history(
        self, *, config: RunnableConfig, channels: Sequence[str]
    ) -> Mapping[str, DeltaChannelHistory]:
        return self._on_loop(self.aget_delta_channel_history(config=config, channels=channels))
