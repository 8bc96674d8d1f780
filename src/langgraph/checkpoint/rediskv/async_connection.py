"""The transport's connection, written once (async; ``sync_connection.py`` is generated
from it by ``scripts/unasync.py``: edit this file and run the script.)
The saver made from its options: its client and pool, its scripts, and the function library
on the server (loaded at first use, on each primary of a cluster)."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Iterable
from contextlib import AbstractAsyncContextManager
from typing import Any, TypeVar

import redis.asyncio as aredis
from langgraph.checkpoint.serde.base import SerializerProtocol
from redis.asyncio.cluster import RedisCluster as AsyncRedisCluster
from redis.asyncio.retry import Retry
from redis.commands.core import AsyncScript
from redis.exceptions import ClusterError, RedisError, ResponseError

from .base import (
    UNAVAILABLE,
    RedisSaverBase,
    refuse_decoding_client,
    retry_backoff,
)
from .compat import resolve_arguments
from .core import (
    DEFAULT_BULK_LIMIT,
    DEFAULT_INDEXED_METADATA,
    ScriptCall,
)
from .functions import FunctionLibrary
from .options import (
    CONNECT_TIMEOUT,
    MAX_CONNECTIONS,
    POOL_TIMEOUT,
    RETRIES,
    SLOT_MOVE_WAIT,
    SOCKET_TIMEOUT,
    SaverSettings,
)
from .replication import WaitForReplicas
from .scripts import script_sources

Saver = TypeVar("Saver", bound="AsyncConnection")


class AsyncConnection(RedisSaverBase):
    """A saver's client and its function library: what every request goes over."""

    def __init__(
        self,
        url: str | Any = None,
        *,
        client: aredis.Redis | AsyncRedisCluster | None = None,
        cluster: bool = False,
        prefix: str = "lg",
        ttl: Any = None,
        serde: SerializerProtocol | None = None,
        max_connections: int = MAX_CONNECTIONS,
        pool_timeout: float = POOL_TIMEOUT,
        connect_timeout: float = CONNECT_TIMEOUT,
        socket_timeout: float | None = SOCKET_TIMEOUT,
        retries: int = RETRIES,
        index_metadata: Iterable[str] = DEFAULT_INDEXED_METADATA,
        slot_move_wait: float = SLOT_MOVE_WAIT,
        auto_pipeline: bool = True,  # async only
        compression: bool | int = True,
        keep_last: int | None = None,
        on_lost_checkpoint: str = "raise",
        functions: bool = True,
        wait_for_replicas: int = 0,
        wait_timeout: float = 0.1,
        **redis_kwargs: Any,
    ) -> None:
        given = resolve_arguments(
            type(self).__name__,
            url,
            client,
            redis_kwargs,
            is_client=lambda c: isinstance(c, (aredis.Redis, AsyncRedisCluster)),
            client_kind="a redis.asyncio.Redis or redis.asyncio.cluster.RedisCluster client",
            cluster=cluster,
            own_names=inspect.signature(AsyncConnection.__init__).parameters,
            asyncio=True,
        )
        settings = SaverSettings.from_kwargs(
            given.url,
            client_given=given.client is not None,
            cluster=cluster,
            prefix=prefix if given.prefix is None else given.prefix,
            ttl=ttl,
            compression=compression,
            keep_last=keep_last,
            on_lost_checkpoint=on_lost_checkpoint,
            index_metadata=index_metadata,
            functions=functions,
            wait_for_replicas=wait_for_replicas,
            wait_timeout=wait_timeout,
            max_connections=max_connections,
            pool_timeout=pool_timeout,
            connect_timeout=connect_timeout,
            socket_timeout=socket_timeout,
            retries=retries,
            slot_move_wait=slot_move_wait,
            auto_pipeline=auto_pipeline,  # async only
        )
        self._start(settings, given.client, serde, given.redis_kwargs)

    @classmethod
    def from_settings(
        cls: type[Saver],
        settings: SaverSettings,
        *,
        client: aredis.Redis | AsyncRedisCluster | None = None,
        serde: SerializerProtocol | None = None,
        **redis_kwargs: Any,
    ) -> Saver:
        """A saver made from settings already validated (``SaverSettings.from_kwargs`` or
        ``.from_env``), on ``client`` or on a connection of its own to ``settings.url``.

        Args:
            settings: the saver's options, checked (see options.py).
            client: a redis-py client to use instead of a connection of its own.
            serde: the serializer (LangGraph's JsonPlusSerializer by default).
            **redis_kwargs: options of redis-py's connection, as for the constructor.

        Returns:
            The saver.

        Raises:
            ValueError: a client that decodes replies into text, or no client for settings
                made without a URL (``client_given=True``).
        """
        saver = cls.__new__(cls)
        saver._start(settings, client, serde, redis_kwargs)
        return saver

    def _start(
        self,
        settings: SaverSettings,
        client: aredis.Redis | AsyncRedisCluster | None,
        serde: SerializerProtocol | None,
        redis_kwargs: dict[str, Any],
    ) -> None:
        """Make the saver from its settings: its core, its client, its scripts."""
        self._wait = WaitForReplicas.of_settings(settings)
        self._setup(settings, client, serde)
        if client is None:
            options: dict[str, Any] = {
                "max_connections": settings.max_connections,
                "socket_connect_timeout": settings.connect_timeout,
                "socket_timeout": settings.socket_timeout,
                "retry": Retry(retry_backoff(), settings.retries),
                **redis_kwargs,
            }
            # (an option given in redis_kwargs overrides the saver's own)
            client = self._connect(
                self._url, settings.cluster, settings.pool_timeout, settings.retries, options
            )
        assert client is not None
        refuse_decoding_client(client)
        self._slot_move_wait = settings.slot_move_wait
        self._client: aredis.Redis | AsyncRedisCluster = client
        if isinstance(client, AsyncRedisCluster):
            self._on_cluster()
        self._loaded_on_cluster: set[str] = set()  # scripts loaded on every primary
        self._loaded_for_wait: set[str] = set()  # (standalone) scripts loaded, for _waited
        self._scripts: dict[str, AsyncScript] = {
            name: client.register_script(source) for name, source in script_sources().items()
        }
        # a chat turn's operations as FCALLs of a library (on each primary of a cluster)
        self._library_lock = asyncio.Lock()
        self._node_locks: dict[str, asyncio.Lock] = {}  # (on a cluster, one per primary)
        self._library = FunctionLibrary(settings.functions)
        self._policy_checked = False  # the start-up warning of an evicting server (eviction.py)
        self._thread_ttl_checked = False  # (its set_thread_ttl warning, the same)
        self._start_async(settings.max_connections, settings.auto_pipeline)  # async only

    def _connect(
        self, url: str, cluster: bool, pool_timeout: float, retries: int, options: dict[str, Any]
    ) -> aredis.Redis | AsyncRedisCluster:
        """The saver's own client (each saver: its own kind of pool)."""
        raise NotImplementedError

    _cluster_ready: bool  # async only

    def _start_async(self, max_connections: int, auto_pipeline: bool) -> None:  # async only
        raise NotImplementedError  # async only: the saver's event loop, gate and pipeline

    def _node_lock(self, node: str) -> AbstractAsyncContextManager[Any]:
        """The lock of cluster primary ``node``'s library check (each saver: its own kind)."""
        raise NotImplementedError

    def _bind_loop(self) -> None:
        """Called before each operation (the async saver checks its event loop here)."""

    async def _prepare_library(self, call: ScriptCall, lost: bool) -> bool:
        """Check the server's library before its first use, or load it (``lost``: a call
        found its function gone); False when a FUNCTION command lost its connection."""
        library = self._library
        try:
            if lost and library.serves(call) and not library.verified:
                await self._load_library()
            if library.serves(call) and not library.verified:
                await self._check_or_load()
        except UNAVAILABLE:
            library.connection_failed()
            return False
        return True

    async def _check_or_load(self, node: Any = None) -> None:
        """Compare the server's library (on a cluster: primary ``node``'s) with this saver's
        code, or load it where it is not there."""
        library = self._library
        name = node.name if node is not None else None
        try:
            if library.listed(await self._list_library(node), name) or not library.enabled:
                return
            # not there: load it (a saver racing to load it too: compare what is there)
            if await self._load_library(node) and not library.holds(name):
                library.listed(await self._list_library(node), name)
        except (ResponseError, ClusterError) as exc:  # (on a cluster: a primary failing over)
            library.list_failed(exc)

    async def _list_library(self, node: Any = None) -> Any:
        if node is None:
            return await self._client.function_list(library=self._library.name, withcode=True)
        return await self._client.execute_command(
            "FUNCTION LIST", "LIBRARYNAME", self._library.name, "WITHCODE", target_nodes=node
        )

    async def _load_library(self, node: Any = None) -> bool:
        try:
            if node is None:
                await self._client.function_load(self._library.source)
            else:
                await self._client.execute_command(
                    "FUNCTION LOAD", self._library.source, target_nodes=node
                )
        except ResponseError as exc:
            return self._library.load_failed(exc)
        self._library.loaded(node.name if node is not None else None)
        return True

    async def _bulk_limit(self) -> int:
        """The server's proto-max-bulk-len, asked once (the default when CONFIG is denied)."""
        if self._max_bulk is None:
            try:
                reply = await self._client.config_get("proto-max-bulk-len")
                self._max_bulk = int(reply["proto-max-bulk-len"])  # type: ignore[arg-type]
            except (RedisError, KeyError, TypeError, ValueError):
                self._max_bulk = DEFAULT_BULK_LIMIT
        return self._max_bulk
