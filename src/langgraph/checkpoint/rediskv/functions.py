"""How a saver on a standalone server runs the operations of a chat turn: as functions of a
Redis Function library (``FUNCTION LOAD`` once, ``FCALL`` per call), else as scripts.

An ``EVALSHA`` runs its whole script anew, and so makes a closure for every helper the
script's includes define (some 60 for a put, about 60,000 server instructions); a library
makes its helpers once, when it is loaded. The library is built from the same Lua files as
the scripts (scripts.function_library), so the two ways run the same code.

The library is named after the digest of its source: savers of other versions on one server
each load and call their own. A server without functions (Redis 6, fakeredis, a proxy), a user
whose ACL does not allow ``FCALL`` or ``FUNCTION LOAD``, or a library the server will not load
turns functions off for the saver, which then calls the scripts, as before. A library that is
gone (``FUNCTION FLUSH``, a new server behind the same address) is loaded again. This module
decides; the transports (sync.py, aio.py, autopipeline.py) send.
"""

from __future__ import annotations

from redis.exceptions import NoPermissionError, OutOfMemoryError, ResponseError

from .core import ScriptCall
from .scripts import function_library


class FunctionLibrary:
    """The state of one saver's library on its server: whether it is used, and how."""

    def __init__(self, enabled: bool = True) -> None:
        self.name, self.source, self.names = function_library()
        self.enabled = enabled

    def serves(self, call: ScriptCall) -> bool:
        """Whether ``call`` goes out as an FCALL."""
        return self.enabled and call.name in self.names

    def fcall_args(self, call: ScriptCall) -> tuple[str | int | bytes | float, ...]:
        """The arguments of the FCALL command for ``call``."""
        return (self.names[call.name], len(call.keys), *call.keys, *call.args)

    def call_failed(self, exc: ResponseError) -> bool:
        """Whether an FCALL's error is the library's rather than the operation's: the
        function is not there (load the library, then call again), or the server or the ACL
        does not allow functions (they are turned off: call the script)."""
        message = str(exc)
        if message.startswith("Function not found"):
            return True
        # (a command the ACL denies inside the function is the operation's error: the
        # server's message then names that command, not fcall)
        denied = isinstance(exc, NoPermissionError) and "'fcall'" in message
        if denied or message.lower().startswith("unknown command"):
            self.enabled = False
            return True
        return False

    def load_failed(self, exc: ResponseError) -> bool:
        """After ``FUNCTION LOAD`` failed with ``exc``: whether the library is there anyway
        (another saver of this version loaded it first). A server over its maxmemory refuses
        the load for now: this call runs as a script, a later one loads the library. Any
        other refusal (no FUNCTION command, the ACL, a library the server cannot compile)
        turns functions off for the saver."""
        if str(exc).startswith("Library ") and "already exists" in str(exc):
            return True
        if not isinstance(exc, OutOfMemoryError):
            self.enabled = False
        return False
