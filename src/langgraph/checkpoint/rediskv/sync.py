"""``RedisSaver``: the core driven over a synchronous redis-py client (the transport itself
is ``sync_transport.py``, generated from ``async_transport.py``; here what only the sync
saver does)."""

from __future__ import annotations

import asyncio
import builtins
import itertools
import threading
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from contextlib import contextmanager
from types import TracebackType
from typing import Any

import redis
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    DeltaChannelHistory,
)
from redis.cluster import RedisCluster
from redis.exceptions import RedisClusterException
from redis.retry import Retry

from .base import (
    cluster_failure,
    documented_as,
    retry_backoff,
)
from .core import LIST_PAGE
from .options import CONNECT_TIMEOUT, MAX_CONNECTIONS, RETRIES, SOCKET_TIMEOUT
from .sync_transport import SyncTransport

IN_THREAD = "{name} in a worker thread (asyncio.to_thread)."


# checkpoint ids per get_write_paths call (get_task_paths)
WRITE_PATHS_BATCH = 500


def cluster_client(url: str, **options: Any) -> RedisCluster:
    """A client of the Redis Cluster that ``url`` names a node of, opened as
    ``RedisSaver(url, cluster=True)`` opens its own (the store opens its so too): one
    blocking pool per node, with the saver's pool size, timeouts and retries unless
    ``options`` (redis-py's) say otherwise. It reads the slot map now.

    Raises:
        ValueError: the server is not a cluster (cluster mode is not enabled there).
        RedisUnavailableError: no node answers.
    """
    options = {
        "max_connections": MAX_CONNECTIONS,
        "socket_connect_timeout": CONNECT_TIMEOUT,
        "socket_timeout": SOCKET_TIMEOUT,
        "retry": Retry(retry_backoff(), RETRIES),
        **options,
    }
    try:
        return RedisCluster.from_url(
            url, connection_pool_class=redis.BlockingConnectionPool, **options
        )
    except RedisClusterException as exc:
        failure = cluster_failure(url, exc)
        if failure is exc:
            raise
        raise failure from exc


class RedisSaver(SyncTransport):
    """LangGraph checkpointer on plain Redis or Valkey, synchronous.

    Args:
        url: ``redis://``, ``rediss://`` or ``unix://`` URL; defaults to ``$REDIS_URL``, then
            ``redis://localhost:6379/0``. Also ``redis_url=`` (the official saver's name).
        client: your own ``redis.Redis`` or ``redis.cluster.RedisCluster`` (also as the first
            argument, or ``redis_client=``); the saver never closes it.
        cluster: connect to a Redis Cluster (``url`` names any one of its nodes).
        prefix: first part of every key, so several savers can share one database.
        ttl: ``{"default_ttl": minutes | timedelta, "refresh_on_read": bool}`` to let idle
            threads expire; ``None`` keeps everything.
        serde: serializer (LangGraph's JsonPlusSerializer by default).
        max_connections: size of the blocking connection pool the saver creates; a caller
            waits up to ``pool_timeout`` seconds for a free connection.
        connect_timeout, socket_timeout: seconds before a connection attempt, or a call to a
            server that stopped answering, fails (with ``RedisUnavailableError``).
        retries: how often a dropped connection or a timeout is retried, with backoff.
        index_metadata: metadata keys that get a global index (standalone servers only), so
            that ``list(None, filter={key: value})`` costs what it finds, not the store's size;
            add the keys you look threads up by, e.g. ``("run_id", "user_id")`` (not keys of a
            few values such as ``source`` or ``step``: their index hardly narrows a search).
        compression: values of 128 bytes and more are stored zstd-compressed (level 1, about
            3x on chat text); an int from 1 to 22 sets the level, ``False`` stores values as
            the serializer writes them. Compressed values stay readable either way. With an
            ``EncryptedSerializer``, values are compressed before they are encrypted.
        keep_last: keep only the newest this many checkpoints of each thread and namespace:
            every put removes older ones (with their writes and the blobs only they use), a
            few per put, so the cost per put stays constant. ``keep_last=1`` is the shallow
            mode (the official package's ``ShallowRedisSaver``): a conversation's memory stays flat
            however long it runs. The limit is per namespace: a graph with subgraphs keeps
            the newest of each subgraph namespace too (they are not trimmed by the parent's
            puts). Checkpoints that a kept one rebuilds a DeltaChannel from are kept too (and
            hidden from get and list). ``None`` (the default) keeps the whole history.
        on_lost_checkpoint: what ``get_tuple`` of a thread's latest checkpoint does when that
            checkpoint lost a value or its record to the server's eviction: ``"raise"`` (the
            default) raises CheckpointLostError; ``"fall_back"`` returns the newest checkpoint
            of the thread and namespace that is still complete, and logs a warning (README,
            Eviction). A read by checkpoint id always raises.
        functions: run put, put_writes, get_tuple and list (of one thread) as functions of a
            Lua library (FUNCTION LOAD once, on each primary of a cluster; then FCALL) built
            from the same scripts: the server makes the scripts' helpers once instead of on
            every call (about 20% fewer server instructions per chat turn). Falls back to
            scripts where the server or the ACL allows no functions; ``False`` always uses
            scripts.
        **redis_kwargs: any other redis-py connection option for the saver's own pool, e.g.
            ``ssl_ca_certs=...`` for rediss:// with a private CA, or ``username=...`` (or the
            same in ``connection_args={...}``); a name redis-py does not take fails here.
            ``checkpoint_prefix=`` is ``prefix``.

    The async methods (``aput`` ...) run the sync ones in a worker thread.
    """

    def _connect(
        self, url: str, cluster: bool, pool_timeout: float, retries: int, options: dict[str, Any]
    ) -> redis.Redis | RedisCluster:
        if cluster:
            return cluster_client(url, **options)
        pool = redis.BlockingConnectionPool.from_url(
            url, **{"timeout": pool_timeout, "retry_on_timeout": retries > 0, **options}
        )
        return redis.Redis(connection_pool=pool)

    @classmethod
    @contextmanager
    def from_conn_string(cls, url: str | None = None, **kwargs: Any) -> Iterator[RedisSaver]:
        """A saver that is closed when the ``with`` block ends.

        Args:
            url: as for :class:`RedisSaver`.
            **kwargs: any other argument of :class:`RedisSaver`.

        Returns:
            A context manager that yields the saver.

        Raises:
            ValueError: an argument the saver does not take, or a bad value.
        """
        saver = cls(url, **kwargs)
        try:
            yield saver
        finally:
            saver.close()

    @property
    def client(self) -> redis.Redis | RedisCluster:
        """The redis-py client the saver uses (its own, or the one passed in)."""
        return self._client

    def close(self) -> None:
        """Close the connections the saver opened (never a client passed in).

        Returns:
            None.

        Raises:
            Nothing: redis-py's errors while closing are its own.
        """
        if self._owns_client:
            self._client.close()
            if isinstance(self._client, redis.Redis):  # its pool was handed in: close it too
                self._client.connection_pool.disconnect()

    # -- for migrate (a rediskv saver as a source) ---------------------------------------
    def get_kept_tuple(self, thread_id: str, ns: str, checkpoint_id: str) -> CheckpointTuple | None:
        """A checkpoint by id, also one ``keep_last`` hides from ``list`` and ``get_tuple``
        because newer checkpoints rebuild their delta channels from it (``migrate`` copies
        those too).

        Args:
            thread_id: the thread.
            ns: the checkpoint namespace ("" for the root graph).
            checkpoint_id: the checkpoint.

        Returns:
            The checkpoint, or None if the saver keeps none of that id.

        Raises:
            RedisUnavailableError: the server could not be reached.
        """
        return self._run(self._core.get_kept_checkpoint(thread_id, ns, checkpoint_id))

    def get_task_paths(self, thread_id: str, ns: str) -> dict[tuple[str, str, str], str]:
        """The task path of each pending write's task, which ``list`` does not return, for
        every checkpoint of a namespace (hidden ones too), ``WRITE_PATHS_BATCH`` per call.

        Args:
            thread_id: the thread.
            ns: the checkpoint namespace.

        Returns:
            ``{(ns, checkpoint_id, task_id): task_path}`` for each task with pending writes.

        Raises:
            RedisUnavailableError: the server could not be reached.
        """
        keys = self._core.keys
        index = keys.index(keys.tag(thread_id), ns)
        ids = [
            i.decode() if isinstance(i, bytes) else str(i) for i in self.client.zrange(index, 0, -1)
        ]
        found: dict[tuple[str, str, str], str] = {}
        for start in range(0, len(ids), WRITE_PATHS_BATCH):
            chunk = ids[start : start + WRITE_PATHS_BATCH]
            found.update(self._run(self._core.get_write_paths(thread_id, ns, chunk)))
        return found

    def __enter__(self) -> RedisSaver:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def _node_lock(self, node: str) -> threading.Lock:
        """The lock of cluster primary ``node``'s library check: one per primary, so that a
        check held up by a primary that does not answer holds up no call to another."""
        with self._library_lock:
            return self._node_locks.setdefault(node, threading.Lock())

    # -- async API: the sync calls, run in a worker thread ------------------------------------
    @documented_as(SyncTransport.setup, IN_THREAD)
    async def asetup(self) -> None:
        await asyncio.to_thread(self.setup)

    @documented_as(SyncTransport.get_tuple, IN_THREAD)
    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        return await asyncio.to_thread(self.get_tuple, config)

    @documented_as(SyncTransport.list, IN_THREAD)
    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        # a page at a time, each read in a worker thread: a listing's memory stays bounded
        listing = self.list(config, filter=filter, before=before, limit=limit)

        def more() -> builtins.list[CheckpointTuple]:
            return builtins.list(itertools.islice(listing, LIST_PAGE))

        while True:
            page = await asyncio.to_thread(more)
            for item in page:
                yield item
            if len(page) < LIST_PAGE:
                return

    @documented_as(SyncTransport.put, IN_THREAD)
    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        return await asyncio.to_thread(self.put, config, checkpoint, metadata, new_versions)

    @documented_as(SyncTransport.put_writes, IN_THREAD)
    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        await asyncio.to_thread(self.put_writes, config, writes, task_id, task_path)

    @documented_as(SyncTransport.delete_thread, IN_THREAD)
    async def adelete_thread(self, thread_id: str) -> None:
        await asyncio.to_thread(self.delete_thread, thread_id)

    @documented_as(SyncTransport.delete_for_runs, IN_THREAD)
    async def adelete_for_runs(self, run_ids: Sequence[str]) -> None:
        await asyncio.to_thread(self.delete_for_runs, run_ids)

    @documented_as(SyncTransport.copy_thread, IN_THREAD)
    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        await asyncio.to_thread(self.copy_thread, source_thread_id, target_thread_id)

    @documented_as(SyncTransport.prune, IN_THREAD)
    async def aprune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        await asyncio.to_thread(self.prune, thread_ids, strategy=strategy)

    @documented_as(SyncTransport.get_delta_channel_history, IN_THREAD)
    async def aget_delta_channel_history(
        self, *, config: RunnableConfig, channels: Sequence[str]
    ) -> Mapping[str, DeltaChannelHistory]:
        return await asyncio.to_thread(
            self.get_delta_channel_history, config=config, channels=channels
        )
