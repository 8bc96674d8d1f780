"""Commands packed in C on the asyncio connections the saver opens itself.

redis-py's sync connections pack a command with hiredis's ``pack_command`` when hiredis is
installed (a dependency of this package); its asyncio connections pack every argument in
Python. A put sends some 40 arguments: packing them in C takes about a third of the client
CPU it takes in Python (``python benchmarks/bench.py --profile``: 85 us against 26 on a busy
machine, 34 against 11 on an idle one). The connections of the pools the async saver creates
pack as the sync client does, but for large commands: hiredis copies every argument into one
buffer, which costs more than Python's packer (which sends large arguments as they are) from
some tens of KB on, and much more from a few hundred (300 KB: 270 us against 6).

A client the caller passes is left as it is, and so is a pool whose text encoding, encoder
or connection class's packer the caller chose.
"""

from __future__ import annotations

from typing import Any

from redis._parsers import Encoder
from redis.asyncio.connection import AbstractConnection, ConnectionPool

try:  # (redis-py 5.x and later, with hiredis installed)
    from redis.connection import HiredisRespSerializer
    from redis.utils import HIREDIS_AVAILABLE
except ImportError:  # pragma: no cover - an older or stripped redis-py: Python packing
    HIREDIS_AVAILABLE = False

# Commands whose text and bytes arguments add up to more than this are packed in Python.
LARGE_COMMAND = 32 * 1024


def pack_in_c(pool: ConnectionPool) -> None:
    """Let the connections ``pool`` opens from now on pack commands with hiredis, as redis-py's
    sync connections do; unless the pool encodes text in other than strict UTF-8 (hiredis's
    encoding), with an encoder of the caller's, or with a connection class that packs in its
    own way."""
    kwargs = pool.connection_kwargs
    if kwargs.get("encoding", "utf-8").lower().replace("_", "-") not in ("utf-8", "utf8"):
        return
    if kwargs.get("encoding_errors", "strict") != "strict":
        return
    if kwargs.get("encoder_class", Encoder) is not Encoder:
        return
    if pool.connection_class.pack_command is not AbstractConnection.pack_command:
        return
    pool.connection_class = hiredis_packing(pool.connection_class)


# one subclass per connection class, so that the pools of one class share it
_PACKING_CLASSES: dict[type[AbstractConnection], type[AbstractConnection]] = {}


def hiredis_packing(connection_class: type[AbstractConnection]) -> type[AbstractConnection]:
    """``connection_class`` packing commands with hiredis (the class itself when hiredis is
    not there); large commands (LARGE_COMMAND) as the class does."""
    if not HIREDIS_AVAILABLE:
        return connection_class
    packing = _PACKING_CLASSES.get(connection_class)
    if packing is None:
        serializer = HiredisRespSerializer()
        in_python = connection_class.pack_command

        def pack_command(self: AbstractConnection, *args: Any) -> list[bytes]:
            size = 0
            for arg in args:
                if isinstance(arg, (bytes, str, memoryview, bytearray)):
                    size += len(arg)
            if size > LARGE_COMMAND:
                return in_python(self, *args)
            packed: list[bytes] = serializer.pack(*args)
            return packed

        packing = _PACKING_CLASSES[connection_class] = type(
            f"HiredisPacking{connection_class.__name__}",
            (connection_class,),
            {"pack_command": pack_command, "__module__": __name__},
        )
    return packing
