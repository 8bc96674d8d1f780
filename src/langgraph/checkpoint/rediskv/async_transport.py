"""The transport, written once: what drives the core's requests over an asyncio redis-py
client. ``sync_transport.py`` is generated from this file by ``scripts/unasync.py``; edit
this one and run the script (``--check`` says whether the generated file is current).
What really differs between the savers (threads or an event loop, the auto pipeline, the
context managers, the locks) stays in ``aio.py`` and ``sync.py``."""

from __future__ import annotations

import asyncio
import builtins
import inspect
import itertools
import time
from collections.abc import AsyncIterator, Awaitable, Iterable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from datetime import timedelta
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
from langgraph.checkpoint.serde.base import SerializerProtocol
from redis.asyncio.cluster import RedisCluster as AsyncRedisCluster
from redis.asyncio.retry import Retry
from redis.commands.core import AsyncScript
from redis.exceptions import ClusterError, RedisError, ResponseError, TryAgainError

from .base import (
    RUN_ALONE,
    UNAVAILABLE,
    RedisSaverBase,
    check_server,
    refuse_decoding_client,
    retry_backoff,
)
from .compat import resolve_arguments
from .core import (
    DEFAULT_BULK_LIMIT,
    DEFAULT_INDEXED_METADATA,
    MIN_BULK_LIMIT,
    NodeBatch,
    Op,
    Request,
    ScanKeys,
    ScanPage,
    ScriptCall,
    Stream,
)
from .core.check import Problem, check_store
from .core.delta import get_delta_channel_history
from .eviction import acheck_policy_once
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
from .replication import ATTEMPTS, WaitForReplicas, take_replies, waited_calls
from .scripts import script_sources
from .settings import ttl_seconds
from .storeformat import checked_first
from .transport_support import (
    check_cluster_layout,
    largest_arg,
    next_scan_position,
    node_groups,
    refuse_oversized,
    scan_position,
    take_node_replies,
)

T = TypeVar("T")
Saver = TypeVar("Saver", bound="AsyncTransport")


async def at_once(calls: Iterable[Awaitable[T]]) -> builtins.list[T]:
    """The calls' results, the calls made concurrently (in the sync twin: one by one)."""
    return builtins.list(await asyncio.gather(*calls))


class AsyncTransport(RedisSaverBase):
    """The saver's requests over its client: script calls (as FCALLs of the saver's library
    where it can), batches, scans, cluster routing, waits for replicas; and the checkpointer
    methods, each one operation of the core driven to its end."""

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
            own_names=inspect.signature(AsyncTransport.__init__).parameters,
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
            ValueError: a client that decodes replies into text.
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

    # -- setup --------------------------------------------------------------------------
    async def asetup(self) -> None:
        """Optional (the saver sets itself up at its first call): check now that the server
        can run the saver (Redis 7.0 or later, Valkey 7.2 or later; a Redis Cluster exactly
        when the saver was made with ``cluster=True``), load its scripts and its function
        library, and register its metadata indexes; so a wrong setting fails at start-up,
        not at the first request. Safe to call any number of times, from any process.

        Returns:
            None.

        Raises:
            RedisUnavailableError: the server could not be reached.
            ValueError: a server the saver cannot run on (older than Redis 7.0 or Valkey 7.2,
                or a cluster node for a saver made without ``cluster=True``, or the reverse).
        """
        client = self._client
        try:
            if isinstance(client, AsyncRedisCluster):  # async only
                await client.initialize()  # async only
                self._cluster_ready = True  # async only
            try:
                info: Any = await client.info()
            except ResponseError:  # INFO denied (an ACL): the first call will tell
                info = None
            if info is not None:
                check_server(self._url, info, isinstance(client, AsyncRedisCluster))
            for script in self._scripts.values():
                await client.script_load(script.script)  # (on a cluster: on every primary)
            if isinstance(client, AsyncRedisCluster):
                self._loaded_on_cluster.update(self._scripts)
                for node in client.get_primaries():
                    async with self._node_lock(node.name):
                        await self._prepare_node(node)
            elif self._library.enabled:
                async with self._library_lock:
                    await self._check_or_load()
        except Exception as exc:
            self._raise_translated(exc)
        await self._run(self._core.register_metadata_index())

    # -- requests -----------------------------------------------------------------------
    async def _send(self, request: Request) -> Any:
        """One request of the core, its reply (redis-py's errors as the saver's)."""
        if not self._policy_checked:  # once per saver, at its first call (each primary)
            self._policy_checked = True
            await acheck_policy_once(self._client, self._core.ttl is not None)
        large = largest_arg(request) > MIN_BULK_LIMIT
        if large:
            refuse_oversized(request, await self._bulk_limit())
        try:
            if self._wait is not None and (calls := waited_calls(request)) is not None:
                replies = await self._waited(calls, self._wait)
                return replies[0] if isinstance(request, ScriptCall) else replies
            if isinstance(request, ScriptCall):
                return await self._script_call(request, large)
            if isinstance(request, ScanKeys):
                return [
                    key
                    async for key in self._client.scan_iter(
                        match=request.match, count=request.count
                    )
                ]
            if isinstance(request, ScanPage):
                return await self._scan_page(request)
            if isinstance(self._client, AsyncRedisCluster):
                if isinstance(request, NodeBatch) and len(request.calls) > 1:
                    return await self._node_batch_on_cluster(request)
                return await self._batch_on_cluster(request.calls)
            # a batch: load its scripts, then one pipeline of EVALSHA
            for name in {call.name for call in request.calls}:
                await self._client.script_load(self._scripts[name].script)
            pipe = self._client.pipeline(transaction=False)
            for call in request.calls:
                pipe.evalsha(self._scripts[call.name].sha, len(call.keys), *call.keys, *call.args)
            return await pipe.execute()
        except Exception as exc:
            self._raise_translated(exc, request)

    async def _script_call(self, call: ScriptCall, large: bool) -> Any:
        """One script call (``large``: an argument over MIN_BULK_LIMIT bytes)."""
        if isinstance(self._client, AsyncRedisCluster):
            return await self._call_on_cluster(self._guarded(call))
        return await self._script(call)

    async def _waited(
        self, calls: Sequence[ScriptCall], wait: WaitForReplicas
    ) -> builtins.list[Any]:
        """Write calls as EVALSHA in one pipeline, each node's followed by WAIT on the same
        connection (on a cluster: one WAIT per primary that took a call); calls that failed
        on a lost script or a moved slot go again (with their WAIT)."""
        client = self._client
        cluster = isinstance(client, AsyncRedisCluster)
        if cluster:  # (a call while its slot moves is refused before it starts: TRYAGAIN)
            calls = [self._guarded(call) for call in calls]
        out: builtins.list[Any] = [None] * len(calls)
        pending = builtins.list(range(len(calls)))
        started = time.monotonic()
        # each attempt's WAIT replies: a WAIT covers the writes before it on its connection,
        # those of the calls that went through in an attempt where others failed too
        acknowledged: builtins.list[int] = []
        for attempt in itertools.count():
            loaded = self._loaded_on_cluster if cluster else self._loaded_for_wait
            for name in {calls[i].name for i in pending} - loaded:
                await client.script_load(self._scripts[name].script)  # (on every primary)
                loaded.add(name)
            pipe: Any = client.pipeline() if cluster else client.pipeline(transaction=False)
            nodes: dict[str, Any] = {}
            for i in pending:
                call = calls[i]
                command = ("EVALSHA", self._scripts[call.name].sha, len(call.keys))
                if isinstance(client, AsyncRedisCluster):
                    node = client.get_node_from_key(call.keys[0])
                    assert node is not None
                    nodes[node.name] = node
                    pipe.execute_command(*command, *call.keys, *call.args, target_nodes=node)
                else:
                    pipe.execute_command(*command, *call.keys, *call.args)
            for node in nodes.values():
                pipe.execute_command(*wait.command(), target_nodes=node)
            if not cluster:
                pipe.execute_command(*wait.command())
            try:
                replies = await pipe.execute(raise_on_error=False)
            except UNAVAILABLE as exc:
                if not cluster:
                    raise
                replies = [exc] * (len(pending) + max(1, len(nodes)))
            for count in replies[len(pending) :]:
                if isinstance(count, UNAVAILABLE):
                    continue  # (its node's calls failed too, and go again)
                if isinstance(count, Exception):
                    raise count
                acknowledged.append(count)
            down = [r for r in replies[: len(pending)] if isinstance(r, UNAVAILABLE)]
            if down and attempt >= ATTEMPTS:
                raise down[0]  # (a primary that stays unreachable: no move to wait out)
            again, lost, moved = take_replies(pending, replies[: len(pending)], out)
            if not again:
                wait.check(acknowledged, calls)
                return out
            if lost:
                if attempt >= ATTEMPTS:
                    raise RuntimeError(f"{calls[again[0]].name}: its script keeps being lost")
                loaded.clear()
            if moved and isinstance(client, AsyncRedisCluster):
                # a slot moving, or a primary failing over: as a single call, for as long
                waited = time.monotonic() - started
                if waited >= self._slot_move_wait:
                    raise self._slot_moving(calls[again[0]], waited)
                await client.nodes_manager.initialize()
                pause = retry_backoff().compute(attempt + 1)
                await asyncio.sleep(min(pause, self._slot_move_wait - waited))
            pending = again
        raise AssertionError("unreachable")

    async def _script(self, call: ScriptCall) -> Any:
        """One script call on a standalone server: an FCALL of the saver's library (checked,
        or loaded, before its first use), else an EVALSHA (see functions.py)."""
        library = self._library
        dropped = False
        for lost in (False, True):  # (the second time, the function was not there)
            if library.serves(call) and not library.verified:
                async with self._library_lock:  # (one caller checks or loads it at a time)
                    dropped = not await self._prepare_library(call, lost)
            if not library.ready(call):
                break
            try:
                reply = await self._client.execute_command("FCALL", *library.fcall_args(call))
            except ResponseError as exc:
                if not library.call_failed(exc):
                    raise
            except UNAVAILABLE:
                library.connection_failed()  # (the call goes as a script: idempotent)
                dropped = True
                break
            else:
                library.worked()
                return reply
        reply = await self._scripts[call.name](keys=call.keys, args=call.args)
        if dropped:
            library.script_worked()
        return reply

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

    # -- cluster ------------------------------------------------------------------------
    async def _batch_on_cluster(self, calls: Sequence[ScriptCall]) -> builtins.list[Any]:
        """Calls on a cluster in one pipeline (redis-py sends each node its own; its
        pipelined evalsha() is blocked, EVALSHA as a plain command is not). A call the
        pipeline could not run (its slot moving, a node that lost its scripts) goes again on
        its own, which waits out a move: every script a batch holds may run twice."""
        if len(calls) == 1:  # (a pipeline costs redis-py about a millisecond more)
            return [await self._call_on_cluster(self._guarded(calls[0]))]
        guarded = [self._guarded(call) for call in calls]
        for name in {call.name for call in calls} - self._loaded_on_cluster:
            await self._client.script_load(self._scripts[name].script)  # (on every primary)
            self._loaded_on_cluster.add(name)
        client = self._client
        assert isinstance(client, AsyncRedisCluster)
        pipe = client.pipeline()
        for call in guarded:
            sha = self._scripts[call.name].sha
            # routed here: redis-py's pipeline would ask the node COMMAND GETKEYS for each
            # EVALSHA, to choose how to route it (a call whose slot moved meanwhile comes back
            # MOVED, and goes again alone below)
            node = client.get_node_from_key(call.keys[0])
            pipe.execute_command(
                "EVALSHA", sha, len(call.keys), *call.keys, *call.args, target_nodes=node
            )
        try:
            replies = await pipe.execute(raise_on_error=False)
        except UNAVAILABLE as exc:
            replies = [exc] * len(guarded)
        if any(isinstance(reply, UNAVAILABLE) for reply in replies):
            # a primary gone (a failover): redis-py's pipeline re-routes one command per
            # retry, the others still bound for the node it was given, or hands back the
            # error; with the slot map read again, those calls go again alone (every script
            # is idempotent), and fail only if the cluster has not recovered
            await client.nodes_manager.initialize()
        out = []
        for call, reply in zip(guarded, replies, strict=True):
            if isinstance(reply, (*RUN_ALONE, *UNAVAILABLE)):
                reply = await self._call_on_cluster(call)
            elif isinstance(reply, Exception):
                raise reply
            out.append(reply)
        return out

    async def _scan_page(self, request: ScanPage) -> tuple[str | None, builtins.list[bytes]]:
        """One step of a scan: on a cluster, of one primary's keys (the cursor names which),
        the primaries' slot layout checked at each step."""
        client = self._client
        if isinstance(client, AsyncRedisCluster):
            nodes = sorted(client.get_primaries(), key=lambda n: n.name)
            layout = await self._cluster_layout(request.cursor, nodes)
            at, cursor = scan_position(request.cursor)
            if at >= len(nodes):  # (a primary less since the scan began: layout changed)
                return None, []
            node = nodes[at]
            # (a cluster client's SCAN replies with the cursor of each node it asked)
            reply: Any = await client.scan(
                cursor=cursor, match=request.match, count=request.count, target_nodes=node
            )
            cursors, keys = reply
            following = next_scan_position(at, int(cursors[node.name]), len(nodes), layout)
            if following is None:  # (the last step: was a slot moved during it?)
                await self._cluster_layout(f"0:0:{layout}", nodes)
            return following, builtins.list(keys)
        page: Any = await client.scan(
            cursor=scan_position(request.cursor)[1], match=request.match, count=request.count
        )
        return next_scan_position(0, int(page[0]), 1), builtins.list(page[1])

    async def _cluster_layout(self, cursor: str, nodes: builtins.list[Any]) -> str:
        """check_cluster_layout over the primaries' CLUSTER NODES replies."""
        client = self._client
        assert isinstance(client, AsyncRedisCluster)
        replies = await at_once(
            client.execute_command("CLUSTER", "NODES", target_nodes=node) for node in nodes
        )
        return check_cluster_layout(cursor, replies)

    async def _node_batch_on_cluster(self, request: NodeBatch) -> builtins.list[Any]:
        """A NodeBatch: one call of its script per node, over the keys of the threads the
        client's slot map puts there; the calls of a node that failed (or holds one thread)
        go as a Batch, which waits out a slot move."""
        client = self._client
        assert isinstance(client, AsyncRedisCluster)
        out, groups, alone = node_groups(request, client.get_node_from_key)
        script = self._scripts[request.name]
        if request.name not in self._loaded_on_cluster:
            await client.script_load(script.script)  # (on every primary)
            self._loaded_on_cluster.add(request.name)

        async def on_node(node: Any, keys: builtins.list[str]) -> Any:
            try:
                return await client.execute_command(
                    "EVALSHA", script.sha, 0, *request.args, *keys, target_nodes=node
                )
            except RedisError as exc:
                return exc

        results = await at_once(
            on_node(node, [request.calls[i].keys[0] for i in indexes]) for node, indexes in groups
        )
        failed, lost = take_node_replies(groups, results, out)
        if lost:  # (a node restarted: load the script again)
            self._loaded_on_cluster.discard(request.name)
        alone += failed
        if alone:
            alone.sort()
            replies = await self._batch_on_cluster([request.calls[i] for i in alone])
            for i, reply in zip(alone, replies, strict=True):
                out[i] = reply
        return out

    async def _call_on_cluster(self, call: ScriptCall) -> Any:
        """One call on a cluster: an FCALL of the library on the primary of the call's slot
        (the library checked, or loaded, there before its first FCALL), else the script."""
        library = self._library
        client = self._client
        assert isinstance(client, AsyncRedisCluster)
        for _ in range(2):  # (the second time, the function was not there)
            if not library.serves(call):
                break
            # as redis-py sends an EVALSHA: routing an FCALL itself, it would ask the server
            # for the command's keys first (COMMAND GETKEYS, with every argument)
            node = client.get_node_from_key(call.keys[0])
            if node is None:  # (a slot no primary holds: the script says so)
                break
            if not library.holds(node.name):
                async with self._node_lock(node.name):  # (one caller checks or loads it)
                    await self._prepare_node(node)
                if not (library.serves(call) and library.holds(node.name)):
                    break
            try:
                reply = await client.execute_command(
                    "FCALL", *library.fcall_args(call), target_nodes=node
                )
            except (TryAgainError, ClusterError):
                break  # (its slot is moving, nothing ran: the script waits the move out)
            except ResponseError as exc:
                if not library.call_failed(exc, node.name):
                    raise
            except UNAVAILABLE:
                library.node_unreachable(node.name)  # (the call goes as a script: idempotent)
                break
            else:
                library.worked()
                return reply
        return await self._script_on_cluster(call)

    async def _prepare_node(self, node: Any) -> None:
        """Check the library on cluster primary ``node``, or load it there (a primary that
        was added, or restarted empty, since the saver last called it)."""
        if self._library.holds(node.name):
            return
        try:
            await self._check_or_load(node)
        except UNAVAILABLE:
            self._library.node_unreachable(node.name)

    async def _script_on_cluster(self, call: ScriptCall) -> Any:
        """A script call that waits out a move of its slot: the server refuses it (TRYAGAIN)
        until the move ends, having run nothing."""
        backoff = retry_backoff()
        started = time.monotonic()
        for failures in itertools.count(1):
            try:
                return await self._scripts[call.name](keys=call.keys, args=call.args)
            except (TryAgainError, ClusterError):
                waited = time.monotonic() - started
                if waited >= self._slot_move_wait:
                    raise self._slot_moving(call, waited) from None
                await asyncio.sleep(min(backoff.compute(failures), self._slot_move_wait - waited))
        raise AssertionError("unreachable")

    # -- driving the core's operations ---------------------------------------------------
    async def _run(self, op: Op[T]) -> T:
        if not self._core.format_checked:  # the saver's first call (see .storeformat)
            op = checked_first(self._core, op)
        self._bind_loop()
        try:
            request = next(op)
            while True:
                try:
                    reply = await self._send(request)
                except Exception as exc:  # the op may undo what it began; else it raises exc
                    request = op.throw(exc)
                else:
                    request = op.send(reply)
        except StopIteration as done:
            return done.value  # type: ignore[no-any-return]

    async def _stream(self, stream: Stream) -> AsyncIterator[CheckpointTuple]:
        if not self._core.format_checked:  # the saver's first call (see .storeformat)
            stream = checked_first(self._core, stream)
        self._bind_loop()
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
                reply = await self._send(item)

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
            CheckpointLostError: the checkpoint lost a value to the server's eviction (see
                the saver's ``on_lost_checkpoint``).
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
