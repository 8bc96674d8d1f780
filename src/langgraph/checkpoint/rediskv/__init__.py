"""LangGraph checkpointer for plain Redis and Valkey (core commands and Lua only, no modules)."""

from .aio import AsyncRedisSaver
from .core.check import Problem
from .errors import (
    CheckpointLostError,
    CopyInterruptedError,
    ListingInterruptedError,
    RediskvError,
    RedisUnavailableError,
    ReplicationError,
    SerializationError,
    ServerFullError,
    StoreFormatError,
    ThreadLostError,
    ValueTooLargeError,
)
from .shallow import AsyncShallowRedisSaver, ShallowRedisSaver
from .storeformat import RELEASE
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
    "RediskvError",
    "ReplicationError",
    "SerializationError",
    "ServerFullError",
    "ShallowRedisSaver",
    "StoreFormatError",
    "ThreadLostError",
    "ValueTooLargeError",
]
