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
from .sync import RedisSaver

__all__ = [
    "AsyncRedisSaver",
    "CheckpointLostError",
    "CopyInterruptedError",
    "ListingInterruptedError",
    "Problem",
    "RedisSaver",
    "RedisUnavailableError",
    "SerializationError",
    "ServerFullError",
    "ValueTooLargeError",
]
