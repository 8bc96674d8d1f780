"""Commands packed in C on the asyncio connections the saver opens itself.

redis-py's sync connections pack a command with hiredis's ``pack_command`` when hiredis is
installed (a dependency of this package); its asyncio connections pack every argument in
Python. A put sends some 40 arguments: about 80 us of client CPU per ``aput`` in Python,
about 10 in C (``python benchmarks/bench.py --profile``). The connections of the pools the
async saver creates pack as the sync client does; a client the caller passes is left as it
is.
"""

from __future__ import annotations

from typing import Any

from redis.asyncio.connection import AbstractConnection, ConnectionPool

try:  # (redis-py 5.x and later, with hiredis installed)
    from redis.connection import HiredisRespSerializer
    from redis.utils import HIREDIS_AVAILABLE
except ImportError:  # pragma: no cover - an older or stripped redis-py: Python packing
    HIREDIS_AVAILABLE = False


def pack_in_c(pool: ConnectionPool) -> None:
    """Let the connections ``pool`` opens from now on pack commands with hiredis, as redis-py's
    sync connections do, unless the pool encodes text in other than strict UTF-8 (hiredis's
    encoding)."""
    kwargs = pool.connection_kwargs
    if kwargs.get("encoding", "utf-8").lower().replace("_", "-") not in ("utf-8", "utf8"):
        return
    if kwargs.get("encoding_errors", "strict") != "strict":
        return
    pool.connection_class = hiredis_packing(pool.connection_class)


# one subclass per connection class, so that the pools of one class share it
_PACKING_CLASSES: dict[type[AbstractConnection], type[AbstractConnection]] = {}


def hiredis_packing(connection_class: type[AbstractConnection]) -> type[AbstractConnection]:
    """``connection_class`` packing commands with hiredis (the class itself when hiredis is
    not there)."""
    if not HIREDIS_AVAILABLE:
        return connection_class
    packing = _PACKING_CLASSES.get(connection_class)
    if packing is None:
        serializer = HiredisRespSerializer()

        def pack_command(self: AbstractConnection, *args: Any) -> list[bytes]:
            packed: list[bytes] = serializer.pack(*args)
            return packed

        packing = _PACKING_CLASSES[connection_class] = type(
            f"HiredisPacking{connection_class.__name__}",
            (connection_class,),
            {"pack_command": pack_command, "__module__": __name__},
        )
    return packing
