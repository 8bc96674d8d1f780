"""The transport's calls, written once (async; ``sync_calls.py`` is generated
from it by ``scripts/unasync.py``: edit this file and run the script.)
Each request of the core sent over the client (a script call as an FCALL where it can, a
batch, a scan, a wait for replicas), and an operation driven to its end."""

from __future__ import annotations

import asyncio
import builtins
import itertools
import time
from collections.abc import AsyncIterator, Sequence
from typing import Any, TypeVar

from langgraph.checkpoint.base import (
    CheckpointTuple,
)
from redis.asyncio.cluster import RedisCluster as AsyncRedisCluster
from redis.exceptions import ResponseError

from .async_cluster import AsyncClusterRouting
from .base import (
    UNAVAILABLE,
    check_server,
    retry_backoff,
)
from .core import (
    MIN_BULK_LIMIT,
    NodeBatch,
    Op,
    Request,
    ScanKeys,
    ScanPage,
    ScriptCall,
    Stream,
)
from .eviction import acheck_policy_once
from .replication import ATTEMPTS, WaitForReplicas, take_replies, waited_calls
from .storeformat import checked_first
from .transport_support import (
    largest_arg,
    refuse_oversized,
)

T = TypeVar("T")


class AsyncCalls(AsyncClusterRouting):
    """The core's requests sent over the client, and its operations run to their end."""

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
