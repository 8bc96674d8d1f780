"""A LangGraph ``BaseStore`` (long-term memory) on plain Redis or Valkey: core commands and
atomic Lua scripts, no modules. Key layout: :mod:`langgraph.store.rediskv.keys`; usage and
costs: ``docs/store.md``. Semantic search (``index=``): an exact cosine search, the vectors
kept with their items (:mod:`langgraph.store.rediskv.vectors`), on the server's vector search
when it has one (:mod:`langgraph.store.rediskv.ft`, ``vector_search=``)."""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import threading
from collections.abc import AsyncIterator, Callable, Iterable, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import Any, cast

import redis
import redis.asyncio as aredis
from langgraph.store.base import BaseStore, IndexConfig, Item, Op, Result, TTLConfig
from redis.asyncio.cluster import RedisCluster as AsyncRedisCluster
from redis.cluster import RedisCluster

from langgraph.checkpoint.rediskv.aio import async_cluster_client
from langgraph.checkpoint.rediskv.errors import StoreItemLostError
from langgraph.checkpoint.rediskv.sync import cluster_client

from . import ft
from .async_cluster import AsyncClusterRounds
from .base import default_url, refuse_vector_decoding_client, store_config, store_script_sources
from .core import run_batch
from .imports import EmbedRequest, ImportBatch, import_steps
from .namespaces import check_namespaces
from .rounds import Call, Rounds, errors_raised
from .sweep import run_sweep
from .sync_cluster import ClusterRounds
from .vectors import aembed, embed, plan, vector_index

__all__ = ["AsyncRedisStore", "RedisStore", "StoreItemLostError"]

logger = logging.getLogger(__name__)


class _Common(BaseStore):
    supports_ttl = True

    def _init(
        self,
        url: str | None,
        client: Any,
        connect: Callable[[str], Any],
        cluster: bool,
        prefix: str,
        ttl: TTLConfig | None,
        index: IndexConfig | None,
        vector_search: ft.VectorSearch,
    ) -> None:
        """What both constructors do: ``connect`` makes the client from a URL when none
        is given (the store then owns it and closes it), a cluster client when ``cluster``."""
        self.config = store_config(prefix, ttl)
        self.ttl_config = ttl
        self._index = vector_index(index)
        # as InMemoryStore: the config given, and the Embeddings it makes
        self.index_config = index
        self.embeddings = None if self._index is None else self._index.embeddings
        self._owns_client = client is None
        if client is not None and cluster and not self._is_cluster(client):
            raise ValueError(
                "cluster=True, but the client given is not a redis-py RedisCluster: give "
                "the store a cluster client, or leave cluster out"
            )
        self._client = client if client is not None else connect(default_url(url))
        if self._index is not None:
            self.config.dims = self._index.dims
            refuse_vector_decoding_client(self._client)  # (connects lazily: nothing to close)
        self._scripts = {
            name: self._client.register_script(source)
            for name, source in store_script_sources().items()
        }
        self._sweep_after = ""  # where the next sweep_ttl step starts in the namespace index
        self._vector_search = ft.check_mode(vector_search)
        # whether the store found out which vector search it uses (at setup or first use)
        self._vector_search_known = self._index is None or self._vector_search == "client"
        if self._index is not None and self._is_cluster(self._client):
            # an index of the server's covers one node's keys: on a cluster, the client's
            if self._vector_search == "server":
                raise ValueError(
                    "vector_search='server' needs a standalone server: on a Redis Cluster a "
                    "vector index covers one node's keys (use 'auto' or 'client')"
                )
            self._vector_search_known = True

    def _vector_search_found(self, outcome: ft.Outcome, why: str) -> None:
        """Settle the vector search from :func:`ft.start_up`'s outcome."""
        if outcome != "server":
            if self._vector_search == "server":
                if outcome == "none":
                    why = f"the server has no vector search (FT.* with vectors: {why})"
                raise RuntimeError(f"vector_search='server', but {why}")
            log = logger.info if outcome == "none" else logger.warning
            log("rediskv store: the exact client vector search (%s)", why)
        self.config.server_search = outcome == "server"
        self._vector_search_known = True

    @staticmethod
    def _is_cluster(client: Any) -> bool:
        """Whether ``client`` is the cluster client of this kind of store."""
        raise NotImplementedError

    def _sweep_interval(self, minutes: float | None) -> float:
        """The sweeper's period in seconds: the argument, else the ttl's
        sweep_interval_minutes."""
        minutes = minutes or (self.ttl_config or {}).get("sweep_interval_minutes")
        if not minutes or minutes <= 0:
            raise ValueError("no sweep interval: pass one, or set ttl's sweep_interval_minutes")
        return float(minutes) * 60


class RedisStore(_Common):
    """Long-term memory on Redis or Valkey, synchronous (``abatch`` runs ``batch`` in a thread).

    Args:
        url: ``redis://`` URL; defaults to ``$REDIS_URL``, then ``redis://localhost:6379/0``.
        client: your own ``redis.Redis`` or ``redis.cluster.RedisCluster`` (never closed by
            the store).
        cluster: connect to a Redis Cluster (``url`` names any one of its nodes), opened as
            ``RedisSaver(url, cluster=True)`` opens its own (docs/store.md, Redis Cluster).
        prefix: first part of every key.
        ttl: ``{"default_ttl": minutes, "refresh_on_read": bool, "sweep_interval_minutes":
            minutes}`` (the period of :meth:`start_ttl_sweeper`; nothing sweeps unless it is
            called).
        index: semantic search, LangGraph's ``IndexConfig``: ``{"dims": int, "embed":
            Embeddings or function, "fields": [paths]}`` (docs/store.md, Semantic search).
        vector_search: with an ``index``, where a query search runs: ``"auto"`` (default) on
            the server's vector search (FT.*: Redis Stack, Redis 8, valkey-search) when it
            has one, found at :meth:`setup` or the first call, else on the client;
            ``"server"``: on the server's, and a RuntimeError there if it has none;
            ``"client"``: on the client whatever the server has.
    """

    _client: redis.Redis | RedisCluster

    def __init__(
        self,
        url: str | None = None,
        *,
        client: redis.Redis | RedisCluster | None = None,
        cluster: bool = False,
        prefix: str = "store",
        ttl: TTLConfig | None = None,
        index: IndexConfig | None = None,
        vector_search: ft.VectorSearch = "auto",
    ) -> None:
        connect = cluster_client if cluster else redis.Redis.from_url
        self._init(url, client, connect, cluster, prefix, ttl, index, vector_search)
        self._cluster = (
            ClusterRounds(self._client, self._scripts)
            if isinstance(self._client, RedisCluster)
            else None
        )
        self._sweeper: tuple[concurrent.futures.Future[None], threading.Event] | None = None

    @classmethod
    @contextmanager
    def from_conn_string(cls, url: str | None = None, **kwargs: Any) -> Iterator[RedisStore]:
        """A store whose connections close when the ``with`` block ends."""
        store = cls(url, **kwargs)
        try:
            yield store
        finally:
            store.close()

    @staticmethod
    def _is_cluster(client: Any) -> bool:
        return isinstance(client, RedisCluster)

    @property
    def client(self) -> redis.Redis | RedisCluster:
        return self._client

    def close(self) -> None:
        self.stop_ttl_sweeper()
        if self._owns_client:
            self._client.close()

    def _run(self, calls: list[Call]) -> list[Any]:
        if self._cluster is not None:  # (a pipeline split by node: sync_cluster.py)
            return self._cluster.run(calls)
        pipe = cast(redis.Redis, self._client).pipeline(transaction=False)
        for kind, name, keys, args in calls:
            if kind == "script":
                self._scripts[name](keys=list(keys), args=list(args), client=pipe)
            else:
                pipe.execute_command(name, *keys)  # type: ignore[no-untyped-call]
        return errors_raised(calls, pipe.execute(raise_on_error=False))

    def setup(self) -> None:
        """With an ``index``: find out whether the server has a vector search and create the
        store's vector index there (once: idempotent). Without, nothing: the keys appear with
        the first put. The first call does it when this was not called."""
        if self._vector_search_known:
            return
        assert self._index is not None
        steps = ft.start_up(self.config.prefix, self._index.dims)
        try:
            command = next(steps)
            while True:
                try:
                    reply = self._client.execute_command(*command)  # type: ignore[no-untyped-call]
                except redis.ResponseError as error:
                    reply = error
                command = steps.send(reply)
        except StopIteration as done:
            self._vector_search_found(*done.value)

    def _drive(self, rounds: Rounds | Any) -> Any:
        try:
            calls = next(rounds)
            while True:
                calls = rounds.send(self._run(calls))
        except StopIteration as done:
            return done.value

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        ops = list(ops)
        check_namespaces(ops)
        # embedded before any call: an embedder's error leaves the store as it was
        embedding = embed(self._index, plan(self._index, ops))
        self.setup()
        return list(self._drive(run_batch(self.config, ops, embedding)))

    def import_items(
        self,
        items: Iterable[Item],
        *,
        ttl_minutes: float | None = None,
        recopy: bool = False,
        dry_run: bool = False,
    ) -> list[str]:
        """Copy items of another store in, each with its value, created_at and updated_at
        (``rediskv store migrate`` runs this; docs/store.md, Migrating another store in).
        Returns a status per item, in order: "copied"; "present" (the same value JSON and
        created_at are here: nothing written); "conflict" (another item is here: left as it
        is, unless ``recopy`` has it "replaced", in one step); "invalid: why" (a namespace a
        put refuses, a value that is not JSON: not sent); "retry" (with an index: it kept
        changing meanwhile, 3 times). ``dry_run``: "to copy" and "to
        replace" instead, nothing written. With an index, the copies (and present items
        without vectors) are embedded as puts are; ``ttl_minutes`` gives the copies a TTL
        (none by default, whatever the store's default_ttl)."""
        self.setup()  # (the server's vector search, whose documents a copy writes)
        steps = import_steps(
            self.config,
            ImportBatch(list(items)),
            ttl_minutes=ttl_minutes,
            recopy=recopy,
            dry_run=dry_run,
        )
        try:
            step = next(steps)
            while True:
                if isinstance(step, EmbedRequest):
                    step = steps.send(embed(self._index, plan(self._index, step.puts)))
                else:
                    step = steps.send(self._run(step))
        except StopIteration as done:
            return list(done.value)

    def sweep_ttl(self, max_namespaces: int = 1000) -> int:
        """Remove expired items, in a step of bounded work: the next ``max_namespaces``
        namespaces of the index from where the previous call stopped (then from the first
        again), at most 100 expired items each. Returns how many items went. Expired items
        never show either way: this only frees their memory (see docs/store.md, TTL)."""
        purged, self._sweep_after = self._drive(
            run_sweep(self.config, self._sweep_after, max_namespaces)
        )
        return int(purged)

    def start_ttl_sweeper(
        self, sweep_interval_minutes: float | None = None
    ) -> concurrent.futures.Future[None]:
        """Sweep in a daemon thread every ``sweep_interval_minutes`` (else ttl's): each time a
        whole pass over the namespace index, in :meth:`sweep_ttl` steps. A failed pass is
        logged and the next one runs. The future is done once :meth:`stop_ttl_sweeper` ran."""
        if self._sweeper is not None and not self._sweeper[0].done():
            return self._sweeper[0]
        period = self._sweep_interval(sweep_interval_minutes)
        done: concurrent.futures.Future[None] = concurrent.futures.Future()
        stop = threading.Event()

        def sweep() -> None:
            while not stop.wait(period):
                try:
                    while True:
                        self.sweep_ttl()
                        if not self._sweep_after:
                            break
                except Exception:
                    logger.warning("the store's TTL sweep failed", exc_info=True)
            done.set_result(None)

        threading.Thread(target=sweep, name="rediskv-store-sweeper", daemon=True).start()
        self._sweeper = (done, stop)
        return done

    def stop_ttl_sweeper(self, timeout: float | None = None) -> bool:
        """Stop the sweeper; whether it stopped within ``timeout`` seconds."""
        if self._sweeper is None:
            return True
        done, stop = self._sweeper
        stop.set()
        try:
            done.result(timeout)
        except concurrent.futures.TimeoutError:
            return False
        self._sweeper = None
        return True

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        return await asyncio.to_thread(self.batch, list(ops))


def cluster_pool_size(client: AsyncRedisCluster) -> int:
    """The connections the cluster client may open to a node (redis-py's default 100)."""
    manager = getattr(client, "nodes_manager", None)
    return int(getattr(manager, "connection_kwargs", {}).get("max_connections") or 100)


def _async_client(url: str) -> aredis.Redis:
    """The async store's own client: a blocking pool, as the saver's, so that concurrent
    calls past its 100 connections wait for one (redis-py's default pool raises
    MaxConnectionsError; LangGraph runs store calls concurrently)."""
    client = aredis.Redis(connection_pool=aredis.BlockingConnectionPool.from_url(url))
    client.auto_close_connection_pool = True  # (closed with the client, as from_url's)
    return client


class AsyncRedisStore(_Common):
    """Long-term memory on Redis or Valkey over ``redis.asyncio`` (the sync methods raise
    when called from the event loop's thread, as LangGraph's async stores do: use ``a*``).

    Args: as :class:`RedisStore`, ``client`` a ``redis.asyncio.Redis`` or
    ``redis.asyncio.cluster.RedisCluster``.
    """

    _client: aredis.Redis | AsyncRedisCluster

    def __init__(
        self,
        url: str | None = None,
        *,
        client: aredis.Redis | AsyncRedisCluster | None = None,
        cluster: bool = False,
        prefix: str = "store",
        ttl: TTLConfig | None = None,
        index: IndexConfig | None = None,
        vector_search: ft.VectorSearch = "auto",
    ) -> None:
        connect = async_cluster_client if cluster else _async_client
        self._init(url, client, connect, cluster, prefix, ttl, index, vector_search)
        self._cluster = (
            AsyncClusterRounds(self._client, self._scripts, default_url(url))
            if isinstance(self._client, AsyncRedisCluster)
            else None
        )
        # redis-py's async cluster client raises MaxConnectionsError past a node's pool
        # (where a blocking pool waits): concurrent rounds wait at a gate of its size
        self._cluster_gate = (
            None
            if self._cluster is None
            else asyncio.Semaphore(cluster_pool_size(cast(AsyncRedisCluster, self._client)))
        )
        # the event loop the store runs on, for sync calls from other threads (a sync node or
        # tool of an async graph runs in an executor thread): the one it is made on (the
        # Agent Server's factory, from_conn_string), else the first to run a coroutine of it
        try:
            self._loop: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            self._loop = None
        # the sweeper's task, and the event stop_ttl_sweeper sets when it cancels it
        self._sweeper: tuple[asyncio.Task[None], asyncio.Event] | None = None

    @classmethod
    @asynccontextmanager
    async def from_conn_string(
        cls, url: str | None = None, **kwargs: Any
    ) -> AsyncIterator[AsyncRedisStore]:
        """A store whose connections close when the ``async with`` block ends."""
        store = cls(url, **kwargs)
        try:
            yield store
        finally:
            await store.aclose()

    @staticmethod
    def _is_cluster(client: Any) -> bool:
        return isinstance(client, AsyncRedisCluster)

    @property
    def client(self) -> aredis.Redis | AsyncRedisCluster:
        return self._client

    async def aclose(self) -> None:
        await self.stop_ttl_sweeper()
        if self._owns_client:
            await self._client.aclose()

    async def _run(self, calls: list[Call]) -> list[Any]:
        if self._cluster is not None:  # (a pipeline split by node: async_cluster.py)
            assert self._cluster_gate is not None
            async with self._cluster_gate:
                return await self._cluster.run(calls)
        pipe = cast(aredis.Redis, self._client).pipeline(transaction=False)
        for kind, name, keys, args in calls:
            if kind == "script":
                await self._scripts[name](keys=list(keys), args=list(args), client=pipe)
            else:
                pipe.execute_command(name, *keys)
        return errors_raised(calls, await pipe.execute(raise_on_error=False))

    async def asetup(self) -> None:
        """As :meth:`RedisStore.setup`."""
        if self._vector_search_known:
            return
        assert self._index is not None
        steps = ft.start_up(self.config.prefix, self._index.dims)
        try:
            command = next(steps)
            while True:
                try:
                    reply = await self._client.execute_command(*command)
                except redis.ResponseError as error:
                    reply = error
                command = steps.send(reply)
        except StopIteration as done:
            self._vector_search_found(*done.value)

    async def _drive(self, rounds: Rounds | Any) -> Any:
        self._loop = asyncio.get_running_loop()
        try:
            calls = next(rounds)
            while True:
                calls = rounds.send(await self._run(calls))
        except StopIteration as done:
            return done.value

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        ops = list(ops)
        check_namespaces(ops)
        # embedded before any call: an embedder's error leaves the store as it was
        embedding = await aembed(self._index, plan(self._index, ops))
        await self.asetup()
        return list(await self._drive(run_batch(self.config, ops, embedding)))

    async def import_items(
        self,
        items: Iterable[Item],
        *,
        ttl_minutes: float | None = None,
        recopy: bool = False,
        dry_run: bool = False,
    ) -> list[str]:
        """As :meth:`RedisStore.import_items`."""
        await self.asetup()  # (the server's vector search, whose documents a copy writes)
        steps = import_steps(
            self.config,
            ImportBatch(list(items)),
            ttl_minutes=ttl_minutes,
            recopy=recopy,
            dry_run=dry_run,
        )
        try:
            step = next(steps)
            while True:
                if isinstance(step, EmbedRequest):
                    step = steps.send(await aembed(self._index, plan(self._index, step.puts)))
                else:
                    step = steps.send(await self._run(step))
        except StopIteration as done:
            return list(done.value)

    async def sweep_ttl(self, max_namespaces: int = 1000) -> int:
        """As :meth:`RedisStore.sweep_ttl`."""
        purged, self._sweep_after = await self._drive(
            run_sweep(self.config, self._sweep_after, max_namespaces)
        )
        return int(purged)

    async def start_ttl_sweeper(
        self, sweep_interval_minutes: float | None = None
    ) -> asyncio.Task[None]:
        """As :meth:`RedisStore.start_ttl_sweeper`, in a task of the running loop."""
        if self._sweeper is not None and not self._sweeper[0].done():
            return self._sweeper[0]
        period = self._sweep_interval(sweep_interval_minutes)
        stop = asyncio.Event()

        async def sweep() -> None:
            while not stop.is_set():
                await asyncio.sleep(period)
                try:
                    while True:
                        await self.sweep_ttl()
                        if not self._sweep_after:
                            break
                except Exception:
                    if stop.is_set():
                        # the cancel of stop_ttl_sweeper, which redis-py may raise as a
                        # ConnectionError when it lands in a read (the connection is closed)
                        return
                    logger.warning("the store's TTL sweep failed", exc_info=True)

        task = asyncio.create_task(sweep())
        self._sweeper = (task, stop)
        return task

    async def stop_ttl_sweeper(self, timeout: float | None = None) -> bool:
        """Stop the sweeper; whether it stopped within ``timeout`` seconds."""
        if self._sweeper is None:
            return True
        (task, stop), self._sweeper = self._sweeper, None
        if task.done():
            return True
        stop.set()
        task.cancel()
        done, _ = await asyncio.wait([task], timeout=timeout)
        return bool(done)

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        """The ops run on the store's event loop, from another thread (as AsyncPostgresStore
        allows: a sync node or tool of an async graph runs in an executor thread)."""
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            pass
        else:
            raise asyncio.InvalidStateError(
                "Synchronous calls to AsyncRedisStore are only allowed from a different "
                "thread. From the main thread, use the async interface."
            )
        if self._loop is None or self._loop.is_closed():
            raise asyncio.InvalidStateError(
                "AsyncRedisStore has no running event loop yet: make it on the loop it serves "
                "(or make one async call there) before sync calls from threads"
            )
        return asyncio.run_coroutine_threadsafe(self.abatch(ops), self._loop).result()
