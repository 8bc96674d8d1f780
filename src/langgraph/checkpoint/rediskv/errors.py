"""Every error the package raises, under one base, :class:`RediskvError`.

Each error also derives from the built-in or redis-py error it was before the hierarchy
existed, so that ``except`` clauses written against those keep working: ServerFullError is
still an ``OutOfMemoryError``, CheckpointLostError a ``LookupError``, RedisUnavailableError a
redis-py ``ConnectionError``, and so on. The modules that raised them re-export them.
"""

from __future__ import annotations

import time

from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import OutOfMemoryError

# what prevents eviction (CheckpointLostError's message; the doctor's advice: .eviction)
EVICTION_FIX = (
    "set maxmemory-policy noeviction (ElastiCache: in the cluster's parameter group; "
    "Memorystore: the maxmemory-policy configuration)"
)


class RediskvError(Exception):
    """The base of every error this package raises (catch it to catch them all)."""


class SerializationError(RediskvError, TypeError):
    """A value could not be serialized; nothing was written."""


class ValueTooLargeError(RediskvError, ValueError):
    """A value is larger than the server accepts (its proto-max-bulk-len); nothing was
    written."""


class ServerFullError(RediskvError, OutOfMemoryError):
    """The server is over its ``maxmemory`` and refused a write; nothing was written."""


class ListingInterruptedError(RediskvError, RuntimeError):
    """A listing over every thread of a Redis Cluster met slots moved, or being moved,
    between its SCAN steps (see transport_support.check_cluster_layout)."""


class CopyInterruptedError(RediskvError, RuntimeError):
    """copy_thread's target was written, deleted or reaped while the copy ran; the copy was
    discarded (nothing of it is visible). Run it again."""


class StoreFormatError(RediskvError, RuntimeError):
    """The prefix holds data in a format this release cannot read."""


class CheckpointLostError(RediskvError, LookupError):
    """A read found a thread that lost a key it needs (its root, an index, a checkpoint or a
    value) while other keys of the thread are still stored: the server evicted it. Nothing
    is returned rather than an empty or older state that the app would take for the whole
    thread. ``delete_thread`` removes what is left of it."""

    def __init__(self, thread_id: str, what: str, key: str) -> None:
        self.thread_id, self.what, self.key = thread_id, what, key
        super().__init__(
            f"thread {thread_id!r} lost its {what} ({key}) while other keys of the thread are "
            "still stored: the Redis server most likely evicted it under memory pressure (its "
            "maxmemory-policy is not noeviction). The thread cannot be read whole and nothing "
            f"was returned; delete_thread({thread_id!r}) removes what is left, and to prevent "
            f"it {EVICTION_FIX}"
        )


class ThreadLostError(CheckpointLostError):
    """A read found no key of a thread at all while the registry of live threads (``P:alive``,
    lua/thread_deadlines.lua) says it is due: the server evicted it whole. Without the
    registry it would read as a thread that never existed, and the next turn would start it
    again. ``delete_thread`` forgets it."""

    def __init__(self, thread_id: str, key: str, deadline: int) -> None:
        self.deadline = deadline
        when = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(deadline))
        Exception.__init__(
            self,
            f"thread {thread_id!r} lost every key ({key} and all it leads to) while it is due "
            f"until {when} by the registry of live threads: the Redis server most likely "
            "evicted it under memory pressure (its maxmemory-policy is not noeviction). The "
            f"thread cannot be read and nothing was returned; delete_thread({thread_id!r}) "
            f"forgets it, and to prevent it {EVICTION_FIX}",
        )
        self.thread_id, self.what, self.key = thread_id, "thread", key


class StoreItemLostError(RediskvError, LookupError):
    """A read of the store (``langgraph.store.rediskv``) found an item that lost part of
    itself (its value, or its created_at) while its other keys are still stored: the server
    evicted one of the namespace's keys. Nothing is returned rather than a wrong item; a put
    of the item writes it whole again (its created_at restarts), a delete removes it."""

    def __init__(self, namespace: tuple[str, ...], key: str, what: str, redis_key: str) -> None:
        self.namespace, self.key, self.what, self.redis_key = namespace, key, what, redis_key
        super().__init__(
            f"store item {key!r} of namespace {namespace!r} lost its {what} ({redis_key}) "
            "while its other keys are still stored: the Redis server most likely evicted "
            "that key under memory pressure (its maxmemory-policy is not noeviction). Put the "
            f"item again or delete it (every item of the namespace lost it too); to prevent it "
            f"{EVICTION_FIX}"
        )


class RedisUnavailableError(RediskvError, RedisConnectionError):
    """The Redis server could not be reached (a ``redis.exceptions.ConnectionError``)."""


class ReplicationError(RedisUnavailableError):
    """Fewer replicas than ``wait_for_replicas`` acknowledged a write within ``wait_timeout``.
    The write itself happened on the primary (it may be read back), but a failover now may
    lose it. Every write is idempotent: retrying the call is safe."""


class SettingsError(RediskvError, ValueError):
    """A bad setting in the environment; the message names the variable and its value."""

    def __init__(self, variable: str, value: str, expected: str) -> None:
        self.variable = variable
        self.value = value
        super().__init__(f"{variable}={value!r} is invalid: {expected}")


class CliError(RediskvError):
    """A user-facing error of the command line: reported as one line on stderr, exit code 1."""


class MissingExtraError(RediskvError, RuntimeError):
    """An optional package of the ``demo`` extra is not installed."""


class IncludeError(RediskvError, ValueError):
    """A Lua ``-- requires:`` line names an include that does not exist, or includes require
    each other in a cycle, or a file lacks the line (scripts.py's loader)."""
