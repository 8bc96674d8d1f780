"""LangGraph checkpointer for plain Redis and Valkey (core commands and Lua only, no modules)."""

from .aio import AsyncRedisSaver
from .base import RedisUnavailableError
from .core import SerializationError
from .sync import RedisSaver

__all__ = ["AsyncRedisSaver", "RedisSaver", "RedisUnavailableError", "SerializationError"]
