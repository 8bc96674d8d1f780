"""The transport's cluster routing, written once (async; ``sync_cluster.py`` is generated
from it by ``scripts/unasync.py``: edit this file and run the script.)
Each script call sent to the node of its slot (waiting while the slot moves), batches and
scans split by node."""

from __future__ import annotations

import asyncio
import builtins
import itertools
import time
from collections.abc import Awaitable, Iterable, Sequence
from typing import Any, TypeVar

from redis.asyncio.cluster import RedisCluster as AsyncRedisCluster
from redis.exceptions import ClusterError, RedisError, ResponseError, TryAgainError

from .async_connection import AsyncConnection
from .base import (
    RUN_ALONE,
    UNAVAILABLE,
    retry_backoff,
)
from .core import (
    NodeBatch,
    ScanPage,
    ScriptCall,
)
from .transport_support import (
    check_cluster_layout,
    next_scan_position,
    node_groups,
    scan_position,
    take_node_replies,
)

T = TypeVar("T")


async def at_once(calls: Iterable[Awaitable[T]]) -> builtins.list[T]:
    """The calls' results, the calls made concurrently (in the sync twin: one by one)."""
    return builtins.list(await asyncio.gather(*calls))


class AsyncClusterRouting(AsyncConnection):
    """Requests on a Redis Cluster: each call to the node of its slot, batches per node."""

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
