"""Keys lost to the server's eviction (``maxmemory-policy``): the error a read raises when a
thread lost a key it needs, and what each policy means for the saver's keys (the saver's
start-up warning and ``rediskv doctor``). README: "Eviction"."""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

from redis.exceptions import RedisError

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


def warn_of_policy(config: dict[str, Any], keys_expire: bool) -> None:
    """Log the start-up warning when the server's maxmemory settings (CONFIG GET
    maxmemory*) can evict the saver's keys."""
    policy = str(config.get("maxmemory-policy", "noeviction"))
    risk = eviction_risk(policy, keys_expire)
    if risk and int(config.get("maxmemory", 0) or 0) > 0:
        logger.warning(
            "%s: under memory pressure the server drops keys of threads, whose reads then "
            "fail with CheckpointLostError; %s",
            risk,
            FIX,
        )


def check_policy_once(client: Any, keys_expire: bool) -> None:
    """The start-up warning of a standalone saver: one CONFIG GET, nothing when it is
    refused (managed services may deny CONFIG) or fails."""
    try:
        config = client.config_get("maxmemory*")
    except RedisError:
        return
    warn_of_policy(config, keys_expire)


async def acheck_policy_once(client: Any, keys_expire: bool) -> None:
    """check_policy_once for an asyncio client."""
    try:
        config = await client.config_get("maxmemory*")
    except RedisError:
        return
    warn_of_policy(config, keys_expire)


def remove_orphans(client: Any, problems: Iterable[Any], expiring: bool = False) -> list[str]:
    """Unlink the keys that ``check_invariants`` found no index leads to and that never
    expire (what an eviction leaves of a checkpoint or a thread: blobs of an evicted record,
    records of an evicted index); ``expiring``: also those that will expire (of a thread
    just deleted: a global metadata index may still serve another thread's). Returns them.
    Safe while savers run: a put that shares such a blob finds it gone and sends its value
    again (README, Expiry)."""
    from .check import EXPIRING_ORPHAN, ORPHAN  # (check imports core, which imports this)

    kinds = (ORPHAN, EXPIRING_ORPHAN) if expiring else (ORPHAN,)
    orphans = sorted({p.key for p in problems if p.problem in kinds})
    for start in range(0, len(orphans), 1000):
        client.unlink(*orphans[start : start + 1000])
    return orphans
