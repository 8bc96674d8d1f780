"""``AsyncRedisSaver``: the core driven over an asyncio redis-py client."""

from __future__ import annotations

import asyncio
import inspect
import itertools
import time
from collections.abc import AsyncIterator, Awaitable, Iterable, Iterator, Mapping, Sequence
from contextlib import asynccontextmanager
from datetime import timedelta
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
from langgraph.checkpoint.serde.base import SerializerProtocol
from redis.asyncio.cluster import RedisCluster as AsyncRedisCluster
from redis.asyncio.retry import Retry
from redis.exceptions import (
    ClusterError,
    RedisClusterException,
    RedisError,
    ResponseError,
    TryAgainError,
)

from .autopipeline import AutoPipeline
from .base import (
    CONNECT_TIMEOUT,
    MAX_CONNECTIONS,
    POOL_TIMEOUT,
    RETRIES,
    RUN_ALONE,
    SLOT_MOVE_WAIT,
    SOCKET_TIMEOUT,
    UNAVAILABLE,
    RedisSaverBase,
    check_server,
    refuse_decoding_client,
    retry_backoff,
)
from .check import Problem, check_store
from .compat import resolve_arguments
from .core import (
    DEFAULT_BULK_LIMIT,
    DEFAULT_INDEXED_METADATA,
    LIST_PAGE,
    MIN_BULK_LIMIT,
    NodeBatch,
    Op,
    Request,
    ScanKeys,
    ScanPage,
    ScriptCall,
    Stream,
    check_cluster_layout,
    largest_arg,
    next_scan_position,
    node_groups,
    refuse_oversized,
    scan_position,
    take_node_replies,
)
from .delta import get_delta_channel_history
from .eviction import acheck_policy_once
from .functions import FunctionLibrary
from .packing import pack_in_c
from .replication import ATTEMPTS, ReplicationError, WaitForReplicas, take_replies, waited_calls
from .scripts import script_sources
from .settings import ttl_seconds
from .storeformat import checked_first

T = TypeVar("T")


class AsyncRedisSaver(RedisSaverBase):
    """LangGraph checkpointer on plain Redis or Valkey, for asyncio.

    Takes the same arguments as :class:`RedisSaver`; ``client`` is a ``redis.asyncio.Redis``
    or ``redis.asyncio.cluster.RedisCluster``. On a cluster, ``max_connections`` bounds each
    node's connections (redis-py's async cluster client fails rather than waits past it).
    With ``auto_pipeline`` (the default, standalone servers), script calls that concurrent
    graphs make in the same turn of the event loop are sent in one pipeline.
    The sync methods work from threads other than the event loop's (as in LangGraph's
    AsyncPostgresSaver), e.g. for ``graph.get_state`` called from a worker thread.
    """

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
        auto_pipeline: bool = True,
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
            own_names=inspect.signature(AsyncRedisSaver.__init__).parameters,
            asyncio=True,
        )
        client, redis_kwargs = given.client, given.redis_kwargs
        self._wait = WaitForReplicas.of(wait_for_replicas, wait_timeout, socket_timeout)
        connect_url = self._setup(
            given.url,
            client,
            prefix if given.prefix is None else given.prefix,
            ttl,
            serde,
            index_metadata,
            compression,
            keep_last,
            on_lost_checkpoint,
        )
        if connect_url is not None:
            options: dict[str, Any] = {
                "max_connections": max_connections,
                "socket_connect_timeout": connect_timeout,
                "socket_timeout": socket_timeout,
                "retry": Retry(retry_backoff(), retries),
                **redis_kwargs,
            }
            if cluster:
                client = AsyncRedisCluster.from_url(connect_url, **options)
            else:
                # (an option given in redis_kwargs overrides the saver's own)
                pool = aredis.BlockingConnectionPool.from_url(
                    connect_url,
                    **{"timeout": pool_timeout, "retry_on_timeout": retries > 0, **options},
                )
                pack_in_c(pool)
                client = aredis.Redis(connection_pool=pool)
        assert client is not None
        refuse_decoding_client(client)
        self._slot_move_wait = slot_move_wait
        self._client: aredis.Redis | AsyncRedisCluster = client
        if isinstance(client, AsyncRedisCluster):
            self._on_cluster()
        self._loaded_on_cluster: set[str] = set()  # scripts loaded on every primary
        self._loaded_for_wait: set[str] = set()  # (standalone) scripts loaded, for _waited
        self._scripts = {
            name: client.register_script(source) for name, source in script_sources().items()
        }
        # a chat turn's operations as FCALLs of a library (on each primary of a cluster)
        self._library_lock = asyncio.Lock()
        self._node_locks: dict[str, asyncio.Lock] = {}  # (on a cluster, one per primary)
        self._library = FunctionLibrary(functions)
        self._policy_checked = False  # the start-up warning of an evicting server (eviction.py)
        self._thread_ttl_checked = False  # (its set_thread_ttl warning, the same)
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
        saver = cls(url, **kwargs)
        try:
            yield saver
        finally:
            await saver.aclose()

    async def asetup(self) -> None:
        """As RedisSaver.setup: optional, and safe to call any number of times."""
        client = self._client
        try:
            if isinstance(client, AsyncRedisCluster):
                await client.initialize()
                self._cluster_ready = True
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
                    async with self._node_locks.setdefault(node.name, asyncio.Lock()):
                        await self._prepare_node(node)
            elif self._library.enabled:
                async with self._library_lock:
                    await self._check_or_load()
        except UNAVAILABLE as exc:
            raise self._unavailable(exc) from exc
        except RedisClusterException as exc:
            self._raise_cluster_failure(exc)
        await self._run(self._core.register_metadata_index())

    def setup(self) -> None:
        """asetup from a thread other than the event loop's (as the other sync methods)."""
        self._on_loop(self.asetup())

    @property
    def client(self) -> aredis.Redis | AsyncRedisCluster:
        return self._client

    async def aclose(self) -> None:
        """Close the connections the saver opened (never a client passed in)."""
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

    # -- transport -----------------------------------------------------------------------
    async def _send(self, request: Request) -> Any:
        if self._cluster_gate is None:
            return await self._send_now(request)
        async with self._cluster_gate:
            if not self._cluster_ready:
                # Learn the topology before the first burst: a fresh async cluster client
                # that many tasks use at once breaks its own connections (redis-py 8.1).
                try:
                    await self._client.initialize()
                except RedisClusterException as exc:
                    self._raise_cluster_failure(exc)
                self._cluster_ready = True
            return await self._send_now(request)

    async def _batch_on_cluster(self, calls: Sequence[ScriptCall]) -> list[Any]:
        """Calls on a cluster in one pipeline: as RedisSaver._batch_on_cluster."""
        if len(calls) == 1:  # (a pipeline costs redis-py more than the call)
            return [await self._call_on_cluster(self._guarded(calls[0]))]
        guarded = [self._guarded(call) for call in calls]
        for name in {call.name for call in calls} - self._loaded_on_cluster:
            await self._client.script_load(self._scripts[name].script)
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

    async def _scan_page(self, request: ScanPage) -> tuple[str | None, list[bytes]]:
        """As RedisSaver._scan_page."""
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
            return following, list(keys)
        page: Any = await client.scan(
            cursor=scan_position(request.cursor)[1], match=request.match, count=request.count
        )
        return next_scan_position(0, int(page[0]), 1), list(page[1])

    async def _cluster_layout(self, cursor: str, nodes: list[Any]) -> str:
        """As RedisSaver._cluster_layout, the primaries asked at once."""
        client = self._client
        assert isinstance(client, AsyncRedisCluster)
        replies = await asyncio.gather(
            *(client.execute_command("CLUSTER", "NODES", target_nodes=node) for node in nodes)
        )
        return check_cluster_layout(cursor, replies)

    async def _node_batch_on_cluster(self, request: NodeBatch) -> list[Any]:
        """A NodeBatch: as RedisSaver._node_batch_on_cluster, the nodes asked at once."""
        assert isinstance(self._client, AsyncRedisCluster)
        out, groups, alone = node_groups(request, self._client.get_node_from_key)
        script = self._scripts[request.name]
        if request.name not in self._loaded_on_cluster:
            await self._client.script_load(script.script)  # (on every primary)
            self._loaded_on_cluster.add(request.name)

        async def on_node(node: Any, keys: list[str]) -> Any:
            try:
                return await self._client.execute_command(
                    "EVALSHA", script.sha, 0, *request.args, *keys, target_nodes=node
                )
            except RedisError as exc:
                return exc

        results = await asyncio.gather(
            *(
                on_node(node, [request.calls[i].keys[0] for i in indexes])
                for node, indexes in groups
            )
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
        """As RedisSaver._call_on_cluster: an FCALL on the primary of the call's slot, else
        the script."""
        library = self._library
        client = self._client
        assert isinstance(client, AsyncRedisCluster)
        for _ in range(2):  # (the second time, the function was not there)
            if not library.serves(call):
                break
            node = client.get_node_from_key(call.keys[0])  # (see RedisSaver._call_on_cluster)
            if node is None:  # (a slot no primary holds: the script says so)
                break
            if not library.holds(node.name):
                # (one caller checks or loads it at a time: see RedisSaver._node_lock)
                async with self._node_locks.setdefault(node.name, asyncio.Lock()):
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
        """As RedisSaver._prepare_node."""
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

    async def _waited(self, calls: Sequence[ScriptCall], wait: WaitForReplicas) -> list[Any]:
        """As RedisSaver._waited."""
        client = self._client
        cluster = isinstance(client, AsyncRedisCluster)
        if cluster:  # (a call while its slot moves is refused before it starts: TRYAGAIN)
            calls = [self._guarded(call) for call in calls]
        out: list[Any] = [None] * len(calls)
        pending = list(range(len(calls)))
        started = time.monotonic()
        acknowledged: list[int] = []  # (as RedisSaver._waited)
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
        """As RedisSaver._check_or_load."""
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

    async def _send_now(self, request: Request) -> Any:
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
                if self._pipeline is not None:
                    return await self._pipeline.call(request, large)
                if isinstance(self._client, AsyncRedisCluster):
                    return await self._call_on_cluster(self._guarded(request))
                return await self._script(request)
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
        except ReplicationError:
            raise  # (a ConnectionError too, that says what it is)
        except UNAVAILABLE as exc:
            raise self._unavailable(exc) from exc
        except RedisClusterException as exc:
            self._raise_cluster_failure(exc)
        except ResponseError as exc:
            explained = self._explain(request, exc)
            if explained is exc:
                raise
            raise explained from exc

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
        return await self._run(self._core.get_tuple(config))

    def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
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
        return await self._run(self._core.put(config, checkpoint, metadata, new_versions))

    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        await self._run(self._core.put_writes(config, writes, task_id, task_path))

    async def adelete_thread(self, thread_id: str) -> None:
        await self._run(self._core.delete_thread(thread_id))

    async def adelete_for_runs(self, run_ids: Sequence[str]) -> None:
        await self._run(self._core.delete_for_runs(run_ids))

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        await self._run(self._core.copy_thread(source_thread_id, target_thread_id))

    async def aprune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        await self._run(self._core.prune(thread_ids, strategy))

    async def acheck_invariants(self) -> list[Problem]:
        """Every inconsistency among the keys of this saver's prefix (empty when sound)."""
        return await self._run(check_store(self._core))

    async def areindex_metadata(self) -> int:
        """See RedisSaver.reindex_metadata."""
        return await self._run(self._core.reindex_metadata())

    # -- per-thread expiry (see RedisSaver.set_thread_ttl) -----------------------------------
    async def aset_thread_ttl(self, thread_id: str, ttl: float | timedelta) -> None:
        if self._core.ttl is None and not self._thread_ttl_checked:
            # the thread's keys now expire, so a volatile-* policy can evict them
            self._thread_ttl_checked = True
            await acheck_policy_once(self._client, True, volatile_only=True)
        await self._run(self._core.set_thread_ttl(thread_id, ttl_seconds(ttl)))

    async def apin_thread(self, thread_id: str) -> None:
        await self._run(self._core.set_thread_ttl(thread_id, 0))

    async def aunpin_thread(self, thread_id: str) -> None:
        await self._run(self._core.set_thread_ttl(thread_id, None))

    async def aget_delta_channel_history(
        self, *, config: RunnableConfig, channels: Sequence[str]
    ) -> Mapping[str, DeltaChannelHistory]:
        """The DeltaChannel ancestor walk, on the server in one script call."""
        return await self._run(get_delta_channel_history(self._core, config, channels))

    # -- sync API: the async calls, run on the saver's event loop from another thread ---------
    def _on_loop(self, awaitable: Awaitable[T]) -> T:
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

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        return self._on_loop(self.aget_tuple(config))

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

    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        return self._on_loop(self.aput(config, checkpoint, metadata, new_versions))

    def put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        self._on_loop(self.aput_writes(config, writes, task_id, task_path))

    def delete_thread(self, thread_id: str) -> None:
        self._on_loop(self.adelete_thread(thread_id))

    def delete_for_runs(self, run_ids: Sequence[str]) -> None:
        self._on_loop(self.adelete_for_runs(run_ids))

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        self._on_loop(self.acopy_thread(source_thread_id, target_thread_id))

    def prune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        self._on_loop(self.aprune(thread_ids, strategy=strategy))

    def get_delta_channel_history(
        self, *, config: RunnableConfig, channels: Sequence[str]
    ) -> Mapping[str, DeltaChannelHistory]:
        return self._on_loop(self.aget_delta_channel_history(config=config, channels=channels))
