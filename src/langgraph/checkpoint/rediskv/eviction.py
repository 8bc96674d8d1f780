"""Keys lost to the server's eviction (``maxmemory-policy``): the error a read raises when a
thread lost a key it needs, and what each policy means for the saver's keys (the saver's
start-up warning and ``rediskv doctor``). README: "Eviction"."""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

from redis.asyncio.cluster import RedisCluster as AsyncRedisCluster
from redis.cluster import RedisCluster
from redis.exceptions import RedisClusterException, RedisError

from .core.check import EXPIRING_ORPHAN, ORPHAN
from .errors import EVICTION_FIX
from .errors import CheckpointLostError as CheckpointLostError  # (its home before errors.py)

logger = logging.getLogger(__name__)

FIX = EVICTION_FIX


def eviction_risk(policy: str, keys_expire: bool) -> str | None:
    """Why ``policy`` can evict keys of the saver's threads (``keys_expire``: some carry an
    expiry, a ttl or a pinned thread), or None when it cannot."""
    if policy.startswith("allkeys-"):
        return f"maxmemory-policy {policy} evicts any key, so single keys of a thread"
    if policy.startswith("volatile-") and keys_expire:
        return (
            f"maxmemory-policy {policy} evicts keys that have an expiry, and the saver's keys "
            "have one (a ttl, or a thread given its own)"
        )
    return None


def warn_of_policy(config: dict[str, Any], keys_expire: bool, volatile_only: bool = False) -> bool:
    """Log the start-up warning when the server's maxmemory settings (CONFIG GET
    maxmemory*) can evict the saver's keys (``volatile_only``: only for a ``volatile-*``
    policy). Whether it did."""
    policy = str(config.get("maxmemory-policy", "noeviction"))
    risk = eviction_risk(policy, keys_expire)
    if volatile_only and not policy.startswith("volatile-"):
        return False
    if risk and int(config.get("maxmemory", 0) or 0) > 0:
        logger.warning(
            "%s: under memory pressure the server drops keys of threads, whose reads then "
            "fail with CheckpointLostError; %s",
            risk,
            FIX,
        )
        return True
    return False


# On a cluster, CONFIG GET asks each primary (every node holds part of the saver's keys).
PRIMARIES = "primaries"


def _is_cluster(client: Any) -> bool:
    return isinstance(client, (RedisCluster, AsyncRedisCluster))


def _per_node(reply: dict[Any, Any]) -> list[dict[str, Any]]:
    """The configs of a CONFIG GET: one per node when a cluster client asked several."""
    if reply and all(isinstance(config, dict) for config in reply.values()):
        return list(reply.values())
    return [reply]


def _warn_of_configs(replies: list[dict[str, Any]], keys_expire: bool, volatile_only: bool) -> None:
    for config in replies:  # (one warning, however many primaries evict)
        if warn_of_policy(config, keys_expire, volatile_only):
            return


def check_policy_once(client: Any, keys_expire: bool, volatile_only: bool = False) -> None:
    """The warning of a saver at its first call (or, ``volatile_only``, at the first
    set_thread_ttl of a saver without a ttl): one CONFIG GET, of each primary on a cluster;
    nothing when it is refused (managed services may deny CONFIG) or fails."""
    try:
        if _is_cluster(client):
            replies = _per_node(client.config_get("maxmemory*", target_nodes=PRIMARIES))
        else:
            replies = [client.config_get("maxmemory*")]
    except (RedisError, RedisClusterException):
        return
    _warn_of_configs(replies, keys_expire, volatile_only)


async def acheck_policy_once(client: Any, keys_expire: bool, volatile_only: bool = False) -> None:
    """check_policy_once for an asyncio client."""
    try:
        if _is_cluster(client):
            replies = _per_node(await client.config_get("maxmemory*", target_nodes=PRIMARIES))
        else:
            replies = [await client.config_get("maxmemory*")]
    except (RedisError, RedisClusterException):
        return
    _warn_of_configs(replies, keys_expire, volatile_only)


def remove_orphans(client: Any, problems: Iterable[Any], expiring: bool = False) -> list[str]:
    """Unlink the keys that ``check_invariants`` found no index leads to and that never
    expire (what an eviction leaves of a checkpoint or a thread: blobs of an evicted record,
    records of an evicted index); ``expiring``: also those that will expire (of a thread
    just deleted: a global metadata index may still serve another thread's). Returns them.
    Safe while savers run: a put that shares such a blob finds it gone and sends its value
    again (README, Expiry)."""

    kinds = (ORPHAN, EXPIRING_ORPHAN) if expiring else (ORPHAN,)
    orphans = sorted({p.key for p in problems if p.problem in kinds})
    for start in range(0, len(orphans), 1000):
        client.unlink(*orphans[start : start + 1000])
    return orphans
