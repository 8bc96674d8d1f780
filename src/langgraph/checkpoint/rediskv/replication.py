"""Opt-in replica durability: ``WAIT`` pipelined after each write (``wait_for_replicas``).

Redis replicates asynchronously: a write is acknowledged once the primary has it, and a
failover promotes a replica that may not have received the last writes yet. With
``wait_for_replicas=N`` the saver sends ``WAIT N <timeout>`` right after each write call, in
the same pipeline and on the same connection (on a cluster: to the primary that took the
write), so a write returns only once N replicas hold it in memory. Free of I/O: the
transports (:mod:`.sync`, :mod:`.aio`) send what this module describes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from redis.exceptions import NoScriptError

from .base import RUN_ALONE, UNAVAILABLE
from .core import Batch, Request, ScriptCall
from .errors import ReplicationError as ReplicationError  # (re-exported)
from .options import SaverSettings

# The scripts whose writes are the caller's: a put, its writes, a delete, prune, copy, a TTL
# set, and on a cluster the threads-by-value entries a put writes ahead (a list that lost the
# entry hides the thread from filtered listings). Reads that write only housekeeping (a TTL
# refreshed, a stale entry swept) are not waited for, nor is the registry of indexed keys
# (a put whose saver finds its keys missing registers them again): losing those loses nothing.
# The registry of live threads is waited for: a forget a failover lost would make a deleted
# thread read as one evicted whole (its "due" reads are waited for too, as the script's name
# is what decides; they come only where a read on a cluster found no key of its thread: on a
# standalone server the read's own script asks the registry, not waited for, and what it
# writes, a passed entry removed, loses nothing).
WAITED_SCRIPTS = frozenset(
    {
        "put_checkpoint",
        "put_writes",
        "delete_thread",
        "delete_for_runs",
        "prune",
        "import_thread",
        "reap_thread",
        "set_thread_ttl",
        "enter_thread_list",
        "reindex_thread",
        "thread_deadlines",
    }
)
# how often a waited pipeline's failed calls go again (a script reloaded, a slot map read
# again after a failover): every script is idempotent
ATTEMPTS = 3


@dataclass(frozen=True, slots=True)
class WaitForReplicas:
    """``WAIT replicas timeout_ms`` after each write."""

    replicas: int
    timeout_ms: int

    @classmethod
    def of_settings(cls, settings: SaverSettings) -> WaitForReplicas | None:
        """The WAIT of a saver's settings; None when off (0 replicas)."""
        if settings.wait_for_replicas == 0:
            return None
        return cls(settings.wait_for_replicas, settings.wait_timeout_ms)

    def command(self) -> tuple[str, int, int]:
        return ("WAIT", self.replicas, self.timeout_ms)

    def check(self, acknowledged: Sequence[int], calls: Sequence[ScriptCall]) -> None:
        """Raise ReplicationError when a WAIT (one per node) counted too few replicas."""
        fewest = min(acknowledged, default=0)
        if fewest < self.replicas:
            names = ", ".join(sorted({call.name for call in calls}))
            raise ReplicationError(
                f"{names}: only {fewest} of the {self.replicas} replicas asked for "
                f"(wait_for_replicas) acknowledged the write within {self.timeout_ms} ms. "
                "The write happened on the primary and may be read back, but a failover now "
                "may lose it; retrying the call is safe"
            )


def waited_calls(request: Request) -> Sequence[ScriptCall] | None:
    """The calls of a request that writes what WAIT is for, else None."""
    calls = request.calls if isinstance(request, Batch) else (request,)
    if any(isinstance(c, ScriptCall) and c.name in WAITED_SCRIPTS for c in calls):
        return [c for c in calls if isinstance(c, ScriptCall)]
    return None


def take_replies(
    pending: Sequence[int], replies: Sequence[Any], out: list[Any]
) -> tuple[list[int], bool, bool]:
    """Fill ``out`` with the replies of the calls ``pending`` (indexes); returns the calls to
    send again, whether a node had lost the scripts (load them again) and whether a node was
    unreachable or a slot moved (read the slot map again). Any other error is raised."""
    again: list[int] = []
    lost = moved = False
    for i, reply in zip(pending, replies, strict=True):
        if isinstance(reply, NoScriptError):
            lost = True
            again.append(i)
        elif isinstance(reply, (*RUN_ALONE, *UNAVAILABLE)):
            moved = True
            again.append(i)
        elif isinstance(reply, Exception):
            raise reply
        else:
            out[i] = reply
    return again, lost, moved
