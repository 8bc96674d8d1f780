"""LangGraph checkpointer for plain Redis and Valkey (core commands and Lua only, no modules)."""

from .aio import AsyncRedisSaver
from .base import RedisUnavailableError
from .bulk import CopyInterruptedError
from .check import Problem
from .core import (
    ListingInterruptedError,
    SerializationError,
    ServerFullError,
    ValueTooLargeError,
)
from .eviction import CheckpointLostError
from .replication import ReplicationError
from .shallow import AsyncShallowRedisSaver, ShallowRedisSaver
from .storeformat import RELEASE, StoreFormatError
from .sync import RedisSaver

__version__ = RELEASE

__all__ = [
    "AsyncRedisSaver",
    "AsyncShallowRedisSaver",
    "CheckpointLostError",
    "CopyInterruptedError",
    "ListingInterruptedError",
    "Problem",
    "RedisSaver",
    "RedisUnavailableError",
    "ReplicationError",
    "SerializationError",
    "ServerFullError",
    "ShallowRedisSaver",
    "StoreFormatError",
    "ValueTooLargeError",
]
