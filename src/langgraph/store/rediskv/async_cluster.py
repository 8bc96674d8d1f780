"""The store's cluster rounds, written once (async; ``sync_cluster.py`` is generated
from it by ``scripts/unasync.py``: edit this file and run the script.)
A round of the store's calls on a Redis Cluster (the store's transports, ``RedisStore`` and
``AsyncRedisStore``, hand a round here when their client is a cluster client).

A round is one redis-py cluster pipeline, which sends each node the calls of its slots in one
pipeline of its own. A script goes as ``EVALSHA`` routed here to the node of its first key
(redis-py blocks a pipelined ``evalsha()``, and routing an ``EVALSHA`` itself it may ask the
node ``COMMAND GETKEYS``, with every argument); the scripts are loaded on every primary
before the first round that uses them. A call the pipeline could not run goes again alone, as
the saver's batches do (``RUN_ALONE``): its slot moving (``TRYAGAIN``, ``MOVED``, ``ASK``: the
call alone waits the move out, up to ``SLOT_MOVE_WAIT``, then raises RedisUnavailableError;
a cluster down waits as long), a node that lost the scripts
(``NOSCRIPT`` after a restart or a failover: the call alone loads them again), or a node gone
(the slot map is read again first). Each store script is idempotent but for the stamps a put
takes, which a second run only raises: running a call twice is harmless.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import Sequence
from typing import Any

from redis.asyncio.cluster import RedisCluster as AsyncRedisCluster
from redis.commands.core import AsyncScript
from redis.exceptions import ClusterError, NoScriptError, RedisClusterException, TryAgainError

from langgraph.checkpoint.rediskv.base import (
    RUN_ALONE,
    UNAVAILABLE,
    cluster_failure,
    retry_backoff,
)
from langgraph.checkpoint.rediskv.errors import RedisUnavailableError
from langgraph.checkpoint.rediskv.options import SLOT_MOVE_WAIT

from .rounds import Call

__all__ = ["AsyncClusterRounds"]


def _slot_moving(call: Call, waited: float, exc: Exception) -> RedisUnavailableError:
    return RedisUnavailableError(
        f"the cluster slot of {call[2][0]!r} did not serve {call[1]} within {waited:.1f} s "
        f"(a move between nodes that did not end, or a cluster down: {exc}); it was not run"
    )


def _retried(replies: Sequence[Any]) -> tuple[bool, bool]:
    """Whether a node of the round was gone (the slot map is read again), and whether one
    had lost the scripts (they are loaded again)."""
    gone = any(isinstance(reply, UNAVAILABLE) for reply in replies)
    return gone, any(isinstance(reply, NoScriptError) for reply in replies)


class AsyncClusterRounds:
    """The rounds of a store whose client is a ``redis.asyncio.cluster.RedisCluster``."""

    def __init__(
        self,
        client: AsyncRedisCluster,
        scripts: dict[str, AsyncScript],
        url: str,  # async only
        slot_move_wait: float = SLOT_MOVE_WAIT,
    ) -> None:
        self.client = client
        self.url = url  # async only (named in the error of a server that is no cluster)
        self.scripts = scripts
        self.slot_move_wait = slot_move_wait
        self.loaded: set[str] = set()  # the scripts loaded on every primary
        self.ready = False  # async only

    async def run(self, calls: Sequence[Call]) -> list[Any]:
        """The replies of one round of calls, in their order."""
        client = self.client
        # async only: from here
        if not self.ready:
            # the slot map first: get_node_from_key reads it, and a fresh async cluster
            # client that many tasks use at once breaks its own connections (redis-py 8.1)
            try:
                await client.initialize()
            except RedisClusterException as exc:
                failure = cluster_failure(self.url, exc)
                if failure is exc:
                    raise
                raise failure from exc
            self.ready = True
        # async only: to here
        for name in {name for kind, name, _, _ in calls if kind == "script"} - self.loaded:
            await client.script_load(self.scripts[name].script)  # (on every primary)
            self.loaded.add(name)
        pipe = client.pipeline(transaction=False)
        for kind, name, keys, args in calls:
            node = client.get_node_from_key(keys[0])
            if kind == "script":
                sha = self.scripts[name].sha
                pipe.execute_command("EVALSHA", sha, len(keys), *keys, *args, target_nodes=node)
            else:
                pipe.execute_command(name, *keys, target_nodes=node)
        try:
            replies = await pipe.execute(raise_on_error=False)
        except UNAVAILABLE as exc:
            replies = [exc] * len(calls)
        gone, lost = _retried(replies)
        if gone:  # (a primary failed over: redis-py's pipeline may still name the dead one)
            await client.nodes_manager.initialize()
        if lost:
            self.loaded.clear()
        out = []
        for call, reply in zip(calls, replies, strict=True):
            if isinstance(reply, (*RUN_ALONE, *UNAVAILABLE)):
                reply = await self.alone(call)
            elif isinstance(reply, Exception):
                raise reply
            out.append(reply)
        return out

    async def alone(self, call: Call) -> Any:
        """One call on its own, waiting while its slot moves (the server refuses it,
        having run nothing, until the move ends)."""
        kind, name, keys, args = call
        backoff = retry_backoff()
        started = time.monotonic()
        for failures in itertools.count(1):
            try:
                if kind == "script":  # (a NOSCRIPT loads it again, on every primary)
                    return await self.scripts[name](keys=list(keys), args=list(args))
                return await self.client.execute_command(name, *keys)
            except (TryAgainError, ClusterError) as exc:
                waited = time.monotonic() - started
                if waited >= self.slot_move_wait:
                    raise _slot_moving(call, waited, exc) from exc
                await asyncio.sleep(min(backoff.compute(failures), self.slot_move_wait - waited))
        raise AssertionError("unreachable")
