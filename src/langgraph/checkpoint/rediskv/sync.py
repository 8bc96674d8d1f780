"""``RedisSaver``: the core driven over a synchronous redis-py client."""

from __future__ import annotations

import asyncio
import builtins
import inspect
import itertools
import threading
import time
from collections.abc import AsyncIterator, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import timedelta
from types import TracebackType
from typing import Any, TypeVar

import redis
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    DeltaChannelHistory,
)
from langgraph.checkpoint.serde.base import SerializerProtocol
from redis.cluster import RedisCluster
from redis.exceptions import ClusterError, RedisClusterException, ResponseError, TryAgainError
from redis.retry import Retry

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
from .eviction import check_policy_once
from .functions import FunctionLibrary
from .replication import ATTEMPTS, ReplicationError, WaitForReplicas, take_replies, waited_calls
from .scripts import script_sources
from .settings import ttl_seconds
from .storeformat import checked_first

T = TypeVar("T")


class RedisSaver(RedisSaverBase):
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
            checkpoint lost a value to the server's eviction: ``"raise"`` (the default)
            raises CheckpointLostError; ``"fall_back"`` returns the newest checkpoint of the
            thread and namespace that is still complete, and logs a warning (README,
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

    def __init__(
        self,
        url: str | Any = None,
        *,
        client: redis.Redis | RedisCluster | None = None,
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
            is_client=lambda c: isinstance(c, (redis.Redis, RedisCluster)),
            client_kind="a redis.Redis or redis.cluster.RedisCluster client",
            cluster=cluster,
            own_names=inspect.signature(RedisSaver.__init__).parameters,
            asyncio=False,
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
                # one blocking pool per node (it reads the slot map now)
                try:
                    client = RedisCluster.from_url(
                        connect_url, connection_pool_class=redis.BlockingConnectionPool, **options
                    )
                except RedisClusterException as exc:
                    self._raise_cluster_failure(exc)
            else:
                # (an option given in redis_kwargs overrides the saver's own)
                pool = redis.BlockingConnectionPool.from_url(
                    connect_url,
                    **{"timeout": pool_timeout, "retry_on_timeout": retries > 0, **options},
                )
                client = redis.Redis(connection_pool=pool)
        assert client is not None
        refuse_decoding_client(client)
        self._slot_move_wait = slot_move_wait
        self._client: redis.Redis | RedisCluster = client
        if isinstance(client, RedisCluster):
            self._on_cluster()
        self._loaded_on_cluster: set[str] = set()  # scripts loaded on every primary
        self._loaded_for_wait: set[str] = set()  # (standalone) scripts loaded, for _waited
        self._scripts = {
            name: client.register_script(source) for name, source in script_sources().items()
        }
        # a chat turn's operations as FCALLs of a library (on each primary of a cluster)
        self._library_lock = threading.Lock()
        self._node_locks: dict[str, threading.Lock] = {}  # (on a cluster: see _node_lock)
        self._library = FunctionLibrary(functions)
        self._policy_checked = False  # the start-up warning of an evicting server (eviction.py)
        self._thread_ttl_checked = False  # (its set_thread_ttl warning, the same)

    @classmethod
    @contextmanager
    def from_conn_string(cls, url: str | None = None, **kwargs: Any) -> Iterator[RedisSaver]:
        saver = cls(url, **kwargs)
        try:
            yield saver
        finally:
            saver.close()

    def setup(self) -> None:
        """Optional (the saver sets itself up at its first call): check now that the server
        can run the saver (Redis 7.0 or later, Valkey 7.2 or later; a Redis Cluster exactly
        when the saver was made with ``cluster=True``), load its scripts and its function
        library, and register its metadata indexes; so a wrong setting fails at start-up,
        not at the first request. Safe to call any number of times, from any process."""
        client = self._client
        try:
            try:
                info: Any = client.info()
            except ResponseError:  # INFO denied (an ACL): the first call will tell
                info = None
            if info is not None:
                check_server(self._url, info, isinstance(client, RedisCluster))
            for script in self._scripts.values():
                client.script_load(script.script)  # (on a cluster: on every primary)
            if isinstance(client, RedisCluster):
                self._loaded_on_cluster.update(self._scripts)
                for node in client.get_primaries():  # type: ignore[no-untyped-call]
                    with self._node_lock(node.name):
                        self._prepare_node(node)
            elif self._library.enabled:
                with self._library_lock:
                    self._check_or_load()
        except UNAVAILABLE as exc:
            raise self._unavailable(exc) from exc
        except RedisClusterException as exc:
            self._raise_cluster_failure(exc)
        self._run(self._core.register_metadata_index())

    @property
    def client(self) -> redis.Redis | RedisCluster:
        return self._client

    def close(self) -> None:
        """Close the connections the saver opened (never a client passed in)."""
        if self._owns_client:
            self._client.close()
            if isinstance(self._client, redis.Redis):  # its pool was handed in: close it too
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
        if not self._policy_checked:  # once per saver, at its first call (each primary)
            self._policy_checked = True
            check_policy_once(self._client, self._core.ttl is not None)
        if largest_arg(request) > MIN_BULK_LIMIT:
            refuse_oversized(request, self._bulk_limit())
        try:
            if self._wait is not None and (calls := waited_calls(request)) is not None:
                replies = self._waited(calls, self._wait)
                return replies[0] if isinstance(request, ScriptCall) else replies
            if isinstance(request, ScriptCall):
                if isinstance(self._client, RedisCluster):
                    return self._call_on_cluster(self._guarded(request))
                return self._script(request)
            if isinstance(request, ScanKeys):
                return list(self._client.scan_iter(match=request.match, count=request.count))
            if isinstance(request, ScanPage):
                return self._scan_page(request)
            if isinstance(self._client, RedisCluster):
                if isinstance(request, NodeBatch) and len(request.calls) > 1:
                    return self._node_batch_on_cluster(request)
                return self._batch_on_cluster(request.calls)
            # a batch: load its scripts, then one pipeline of EVALSHA
            for name in {call.name for call in request.calls}:
                self._client.script_load(self._scripts[name].script)
            pipe = self._client.pipeline(transaction=False)
            for call in request.calls:
                pipe.evalsha(self._scripts[call.name].sha, len(call.keys), *call.keys, *call.args)
            return pipe.execute()
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

    def _waited(self, calls: Sequence[ScriptCall], wait: WaitForReplicas) -> list[Any]:
        """Write calls as EVALSHA in one pipeline, each node's followed by WAIT on the same
        connection (on a cluster: one WAIT per primary that took a call); calls that failed
        on a lost script or a moved slot go again (with their WAIT)."""
        client = self._client
        cluster = isinstance(client, RedisCluster)
        if cluster:  # (a call while its slot moves is refused before it starts: TRYAGAIN)
            calls = [self._guarded(call) for call in calls]
        out: list[Any] = [None] * len(calls)
        pending = list(range(len(calls)))
        started = time.monotonic()
        # each attempt's WAIT replies: a WAIT covers the writes before it on its connection,
        # those of the calls that went through in an attempt where others failed too
        acknowledged: list[int] = []
        for attempt in itertools.count():
            loaded = self._loaded_on_cluster if cluster else self._loaded_for_wait
            for name in {calls[i].name for i in pending} - loaded:
                client.script_load(self._scripts[name].script)  # (on every primary)
                loaded.add(name)
            pipe: Any = client.pipeline() if cluster else client.pipeline(transaction=False)
            nodes: dict[str, Any] = {}
            for i in pending:
                call = calls[i]
                command = ("EVALSHA", self._scripts[call.name].sha, len(call.keys))
                if isinstance(client, RedisCluster):
                    node = client.get_node_from_key(call.keys[0])  # type: ignore[no-untyped-call]
                    nodes[node.name] = node
                    pipe.execute_command(*command, *call.keys, *call.args, target_nodes=node)
                else:
                    pipe.execute_command(*command, *call.keys, *call.args)
            for node in nodes.values():
                pipe.execute_command(*wait.command(), target_nodes=node)
            if not cluster:
                pipe.execute_command(*wait.command())
            try:
                replies = pipe.execute(raise_on_error=False)
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
            if moved and isinstance(client, RedisCluster):
                # a slot moving, or a primary failing over: as a single call, for as long
                waited = time.monotonic() - started
                if waited >= self._slot_move_wait:
                    raise self._slot_moving(calls[again[0]], waited)
                client.nodes_manager.initialize()
                pause = retry_backoff().compute(attempt + 1)
                time.sleep(min(pause, self._slot_move_wait - waited))
            pending = again
        raise AssertionError("unreachable")

    def _script(self, call: ScriptCall) -> Any:
        """One script call on a standalone server: an FCALL of the saver's library (checked,
        or loaded, before its first use), else an EVALSHA (see functions.py)."""
        library = self._library
        dropped = False
        for lost in (False, True):  # (the second time, the function was not there)
            if library.serves(call) and not library.verified:
                with self._library_lock:  # (one caller checks or loads it at a time)
                    dropped = not self._prepare_library(call, lost)
            if not library.ready(call):
                break
            try:
                reply = self._client.execute_command("FCALL", *library.fcall_args(call))  # type: ignore[no-untyped-call]
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
        reply = self._scripts[call.name](keys=call.keys, args=call.args)
        if dropped:
            library.script_worked()
        return reply

    def _prepare_library(self, call: ScriptCall, lost: bool) -> bool:
        """Check the server's library before its first use, or load it (``lost``: a call
        found its function gone); False when a FUNCTION command lost its connection."""
        library = self._library
        try:
            if lost and library.serves(call) and not library.verified:
                self._load_library()
            if library.serves(call) and not library.verified:
                self._check_or_load()
        except UNAVAILABLE:
            library.connection_failed()
            return False
        return True

    def _check_or_load(self, node: Any = None) -> None:
        """Compare the server's library (on a cluster: primary ``node``'s) with this saver's
        code, or load it where it is not there."""
        library = self._library
        name = node.name if node is not None else None
        try:
            if library.listed(self._list_library(node), name) or not library.enabled:
                return
            # not there: load it (a saver racing to load it too: compare what is there)
            if self._load_library(node) and not library.holds(name):
                library.listed(self._list_library(node), name)
        except (ResponseError, ClusterError) as exc:  # (on a cluster: a primary failing over)
            library.list_failed(exc)

    def _list_library(self, node: Any = None) -> Any:
        if node is None:
            return self._client.function_list(library=self._library.name, withcode=True)
        return self._client.execute_command(  # type: ignore[no-untyped-call]
            "FUNCTION LIST", "LIBRARYNAME", self._library.name, "WITHCODE", target_nodes=node
        )

    def _load_library(self, node: Any = None) -> bool:
        try:
            if node is None:
                self._client.function_load(self._library.source)
            else:
                self._client.execute_command(  # type: ignore[no-untyped-call]
                    "FUNCTION LOAD", self._library.source, target_nodes=node
                )
        except ResponseError as exc:
            return self._library.load_failed(exc)
        self._library.loaded(node.name if node is not None else None)
        return True

    def _batch_on_cluster(self, calls: Sequence[ScriptCall]) -> list[Any]:
        """Calls on a cluster in one pipeline (redis-py sends each node its own; its
        pipelined evalsha() is blocked, EVALSHA as a plain command is not). A call the
        pipeline could not run (its slot moving, a node that lost its scripts) goes again on
        its own, which waits out a move: every script a batch holds may run twice."""
        if len(calls) == 1:  # (a pipeline costs redis-py about a millisecond more)
            return [self._call_on_cluster(self._guarded(calls[0]))]
        guarded = [self._guarded(call) for call in calls]
        for name in {call.name for call in calls} - self._loaded_on_cluster:
            self._client.script_load(self._scripts[name].script)  # (on every primary)
            self._loaded_on_cluster.add(name)
        client = self._client
        assert isinstance(client, RedisCluster)
        pipe = client.pipeline()  # type: ignore[no-untyped-call]
        for call in guarded:
            sha = self._scripts[call.name].sha
            # routed here: redis-py's pipeline would ask the node COMMAND GETKEYS for each
            # EVALSHA, to choose how to route it (a call whose slot moved meanwhile comes back
            # MOVED, and goes again alone below)
            node = client.get_node_from_key(call.keys[0])  # type: ignore[no-untyped-call]
            pipe.execute_command(
                "EVALSHA", sha, len(call.keys), *call.keys, *call.args, target_nodes=node
            )
        try:
            replies = pipe.execute(raise_on_error=False)
        except UNAVAILABLE as exc:
            replies = [exc] * len(guarded)
        if any(isinstance(reply, UNAVAILABLE) for reply in replies):
            # a primary gone (a failover): redis-py's pipeline re-routes one command per
            # retry, the others still bound for the node it was given, or hands back the
            # error; with the slot map read again, those calls go again alone (every script
            # is idempotent), and fail only if the cluster has not recovered
            client.nodes_manager.initialize()
        out = []
        for call, reply in zip(guarded, replies, strict=True):
            if isinstance(reply, (*RUN_ALONE, *UNAVAILABLE)):
                reply = self._call_on_cluster(call)
            elif isinstance(reply, Exception):
                raise reply
            out.append(reply)
        return out

    def _scan_page(self, request: ScanPage) -> tuple[str | None, list[bytes]]:
        client = self._client
        if isinstance(client, RedisCluster):
            nodes = sorted(client.get_primaries(), key=lambda n: n.name)  # type: ignore[no-untyped-call]
            layout = self._cluster_layout(request.cursor, nodes)
            at, cursor = scan_position(request.cursor)
            if at >= len(nodes):  # (a primary less since the scan began: layout changed)
                return None, []
            node = nodes[at]
            # (a cluster client's SCAN replies with the cursor of each node it asked)
            reply: Any = client.scan(
                cursor=cursor, match=request.match, count=request.count, target_nodes=node
            )
            cursors, keys = reply
            following = next_scan_position(at, int(cursors[node.name]), len(nodes), layout)
            if following is None:  # (the last step: was a slot moved during it?)
                self._cluster_layout(f"0:0:{layout}", nodes)
            return following, list(keys)
        page: Any = client.scan(
            cursor=scan_position(request.cursor)[1], match=request.match, count=request.count
        )
        return next_scan_position(0, int(page[0]), 1), list(page[1])

    def _cluster_layout(self, cursor: str, nodes: list[Any]) -> str:
        """check_cluster_layout over the primaries' CLUSTER NODES replies."""
        return check_cluster_layout(
            cursor,
            [
                self._client.execute_command(  # type: ignore[no-untyped-call]
                    "CLUSTER", "NODES", target_nodes=node
                )
                for node in nodes
            ],
        )

    def _node_batch_on_cluster(self, request: NodeBatch) -> list[Any]:
        """A NodeBatch: one call of its script per node, over the keys of the threads the
        client's slot map puts there; the calls of a node that failed (or holds one thread)
        go as a Batch, which waits out a slot move."""
        assert isinstance(self._client, RedisCluster)
        out, groups, alone = node_groups(request, self._client.get_node_from_key)
        script = self._scripts[request.name]
        if request.name not in self._loaded_on_cluster:
            self._client.script_load(script.script)  # (on every primary)
            self._loaded_on_cluster.add(request.name)
        results: list[Any] = []
        for node, indexes in groups:
            keys = [request.calls[i].keys[0] for i in indexes]
            try:
                results.append(
                    self._client.execute_command(  # type: ignore[no-untyped-call]
                        "EVALSHA", script.sha, 0, *request.args, *keys, target_nodes=node
                    )
                )
            except redis.RedisError as exc:
                results.append(exc)
        failed, lost = take_node_replies(groups, results, out)
        if lost:  # (a node restarted: load the script again)
            self._loaded_on_cluster.discard(request.name)
        alone += failed
        if alone:
            alone.sort()
            replies = self._batch_on_cluster([request.calls[i] for i in alone])
            for i, reply in zip(alone, replies, strict=True):
                out[i] = reply
        return out

    def _call_on_cluster(self, call: ScriptCall) -> Any:
        """One call on a cluster: an FCALL of the library on the primary of the call's slot
        (the library checked, or loaded, there before its first FCALL), else the script."""
        library = self._library
        client = self._client
        assert isinstance(client, RedisCluster)
        for _ in range(2):  # (the second time, the function was not there)
            if not library.serves(call):
                break
            # as redis-py sends an EVALSHA: routing an FCALL itself, it would ask the server
            # for the command's keys first (COMMAND GETKEYS, with every argument)
            node = client.get_node_from_key(call.keys[0])  # type: ignore[no-untyped-call]
            if not library.holds(node.name):
                with self._node_lock(node.name):  # (one caller checks or loads it at a time)
                    self._prepare_node(node)
                if not (library.serves(call) and library.holds(node.name)):
                    break
            try:
                reply = client.execute_command(  # type: ignore[no-untyped-call]
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
        return self._script_on_cluster(call)

    def _node_lock(self, node: str) -> threading.Lock:
        """The lock of cluster primary ``node``'s library check: one per primary, so that a
        check held up by a primary that does not answer holds up no call to another."""
        with self._library_lock:
            return self._node_locks.setdefault(node, threading.Lock())

    def _prepare_node(self, node: Any) -> None:
        """Check the library on cluster primary ``node``, or load it there (a primary that
        was added, or restarted empty, since the saver last called it)."""
        if self._library.holds(node.name):
            return
        try:
            self._check_or_load(node)
        except UNAVAILABLE:
            self._library.node_unreachable(node.name)

    def _script_on_cluster(self, call: ScriptCall) -> Any:
        """A script call that waits out a move of its slot: the server refuses it (TRYAGAIN)
        until the move ends, having run nothing."""
        backoff = retry_backoff()
        started = time.monotonic()
        for failures in itertools.count(1):
            try:
                return self._scripts[call.name](keys=call.keys, args=call.args)
            except (TryAgainError, ClusterError):
                waited = time.monotonic() - started
                if waited >= self._slot_move_wait:
                    raise self._slot_moving(call, waited) from None
                time.sleep(min(backoff.compute(failures), self._slot_move_wait - waited))
        raise AssertionError("unreachable")

    def _bulk_limit(self) -> int:
        """The server's proto-max-bulk-len, asked once (the default when CONFIG is denied)."""
        if self._max_bulk is None:
            try:
                reply = self._client.config_get("proto-max-bulk-len")
                self._max_bulk = int(reply["proto-max-bulk-len"])  # type: ignore[arg-type]
            except (redis.RedisError, KeyError, TypeError, ValueError):
                self._max_bulk = DEFAULT_BULK_LIMIT
        return self._max_bulk

    def _run(self, op: Op[T]) -> T:
        if not self._core.format_checked:  # the saver's first call (see .storeformat)
            op = checked_first(self._core, op)
        try:
            request = next(op)
            while True:
                try:
                    reply = self._send(request)
                except Exception as exc:  # the op may undo what it began; else it raises exc
                    request = op.throw(exc)
                else:
                    request = op.send(reply)
        except StopIteration as done:
            return done.value  # type: ignore[no-any-return]

    def _stream(self, stream: Stream) -> Iterator[CheckpointTuple]:
        if not self._core.format_checked:  # the saver's first call (see .storeformat)
            stream = checked_first(self._core, stream)
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
        return self._stream(
            self._core.list_checkpoints(config, filter=filter, before=before, limit=limit)
        )

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

    def check_invariants(self) -> builtins.list[Problem]:
        """Every inconsistency among the keys of this saver's prefix (empty when sound)."""
        return self._run(check_store(self._core))

    def reindex_metadata(self) -> int:
        """Build the global metadata indexes over the checkpoints already stored: needed once
        after adding a key to ``index_metadata`` on a store that has threads (until then,
        ``list(None, filter=...)`` on that key scans the threads). Visits every thread in
        bounded steps; returns the number of index entries added."""
        return self._run(self._core.reindex_metadata())

    # -- per-thread expiry -------------------------------------------------------------------
    def set_thread_ttl(self, thread_id: str, ttl: float | timedelta) -> None:
        """Give one thread its own expiry (minutes or a timedelta), whatever the default."""
        if self._core.ttl is None and not self._thread_ttl_checked:
            # the thread's keys now expire, so a volatile-* policy can evict them
            self._thread_ttl_checked = True
            check_policy_once(self._client, True, volatile_only=True)
        self._run(self._core.set_thread_ttl(thread_id, ttl_seconds(ttl)))

    def pin_thread(self, thread_id: str) -> None:
        """Keep one thread forever: none of its keys expire until it is unpinned."""
        self._run(self._core.set_thread_ttl(thread_id, 0))

    def unpin_thread(self, thread_id: str) -> None:
        """Return a pinned (or own-ttl) thread to the saver's default expiry."""
        self._run(self._core.set_thread_ttl(thread_id, None))

    def get_delta_channel_history(
        self, *, config: RunnableConfig, channels: Sequence[str]
    ) -> Mapping[str, DeltaChannelHistory]:
        """The DeltaChannel ancestor walk, on the server in one script call."""
        return self._run(get_delta_channel_history(self._core, config, channels))

    # -- async API: the sync calls, run in a worker thread ------------------------------------
    async def asetup(self) -> None:
        await asyncio.to_thread(self.setup)

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

    async def aget_delta_channel_history(
        self, *, config: RunnableConfig, channels: Sequence[str]
    ) -> Mapping[str, DeltaChannelHistory]:
        return await asyncio.to_thread(
            self.get_delta_channel_history, config=config, channels=channels
        )
