"""How a saver on a standalone server runs the operations of a chat turn: as functions of a
Redis Function library (``FUNCTION LOAD`` once, ``FCALL`` per call), else as scripts.

An ``EVALSHA`` runs its whole script anew, and so makes a closure for every helper the
script's includes define (some 60 for a put, about 60,000 server instructions); a library
makes its helpers once, when it is loaded. The library is built from the same Lua files as
the scripts (scripts.function_library), so the two ways run the same code.

The library is named after the digest of its source: savers of other versions on one server
each load and call their own. A script is found by the digest of its code; a library only by
its name, which any user allowed ``FUNCTION LOAD`` may have taken first. So a saver uses a
library it did not load itself only once ``FUNCTION LIST ... WITHCODE`` shows it holds this
saver's code, byte for byte (a library that is replaced later is not noticed: see the
README's Security section).

A server without functions (Redis 6, fakeredis, a proxy), a user whose ACL does not allow
``FCALL``, ``FUNCTION LOAD`` or ``FUNCTION LIST``, a library the server will not compile, or a
library of the same name with other code turns functions off for the saver, which then calls
the scripts, as before. A refusal that passes (a server over its maxmemory, a replica being
promoted, too few replicas) sends calls to the scripts for RETRY_AFTER seconds, then the
library is tried again. A library that is gone (``FUNCTION FLUSH``, a new server behind the
same address) is loaded again. This module decides; the transports (sync.py, aio.py,
autopipeline.py) send.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

from redis.exceptions import NoPermissionError, ResponseError

from .core import ScriptCall
from .scripts import function_library

logger = logging.getLogger(__name__)

# Seconds for which calls go to the scripts after a refusal that passes.
RETRY_AFTER = 30.0


def _permanent(exc: ResponseError) -> bool:
    """A refusal that will not pass by itself: no such command, the ACL, a library the server
    cannot compile or register."""
    message = str(exc).lower()
    return (
        isinstance(exc, NoPermissionError)
        or message.startswith("unknown command")
        or message.startswith("unknown subcommand")
        or message.startswith("error compiling")
        or message.startswith("error registering")
    )


def listed_libraries(listing: Any) -> dict[str, str | None]:
    """Each library's code by name in a FUNCTION LIST ... WITHCODE reply (RESP2: each library
    a flat list of names and values; RESP3: a map)."""
    libraries: dict[str, str | None] = {}
    for library in listing or []:
        fields = (
            library
            if isinstance(library, dict)
            else dict(zip(library[::2], library[1::2], strict=False))
        )
        fields = {_text(k): v for k, v in fields.items()}
        code = fields.get("library_code")
        libraries[_text(fields.get("library_name", b""))] = (
            _text(code) if code is not None else None
        )
    return libraries


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


class FunctionLibrary:
    """The state of one saver's library on its server: whether it is used, and how."""

    def __init__(self, enabled: bool = True, clock: Callable[[], float] | None = None) -> None:
        self.name, self.source, self.names = function_library()
        self.enabled = enabled
        # the server's library holds this saver's code: loaded by it, or listed and compared
        self.verified = False
        self._clock = clock or time.monotonic
        self._paused_until = 0.0

    def serves(self, call: ScriptCall) -> bool:
        """Whether ``call`` is to go out as an FCALL (once the library is verified)."""
        return self.enabled and call.name in self.names and self._clock() >= self._paused_until

    def ready(self, call: ScriptCall) -> bool:
        """Whether ``call`` goes out as an FCALL as it is, with no check first (a pipeline)."""
        return self.verified and self.serves(call)

    def fcall_args(self, call: ScriptCall) -> tuple[str | int | bytes | float, ...]:
        """The arguments of the FCALL command for ``call``."""
        return (self.names[call.name], len(call.keys), *call.keys, *call.args)

    def call_failed(self, exc: ResponseError) -> bool:
        """Whether an FCALL's error is the library's rather than the operation's: the
        function is not there (load the library, then call again), or the server or the ACL
        does not allow functions (they are turned off: call the script)."""
        message = str(exc)
        if message.startswith("Function not found"):
            self.verified = False  # (whatever is loaded next is checked again)
            return True
        # (a command the ACL denies inside the function is the operation's error: the
        # server's message then names that command, not fcall)
        denied = isinstance(exc, NoPermissionError) and "'fcall'" in message
        if denied or message.lower().startswith("unknown command"):
            self._turn_off(exc)
            return True
        return False

    def loaded(self) -> None:
        """FUNCTION LOAD took the library: the server holds this saver's code."""
        self.verified = True

    def load_failed(self, exc: ResponseError) -> bool:
        """After ``FUNCTION LOAD`` failed with ``exc``: whether a library of that name is
        there anyway (loaded first by another saver; its code is still to be compared). A
        refusal that passes sends calls to the scripts for a while; any other turns
        functions off for the saver."""
        if str(exc).startswith("Library ") and "already exists" in str(exc):
            return True
        self._refused(exc)
        return False

    def listed(self, listing: Any) -> bool:
        """After FUNCTION LIST LIBRARYNAME <name> WITHCODE: whether the library holds this
        saver's code (when it is not there at all, it is to be loaded: False). A library of
        this name with other code turns functions off."""
        code = listed_libraries(listing).get(self.name)
        if code is None:
            return False
        if code != self.source:
            self.enabled = False
            logger.warning(
                "the Redis function library %s on the server is not this saver's code: "
                "the saver runs its scripts instead (delete the library, FUNCTION DELETE %s, "
                "to let it load its own)",
                self.name,
                self.name,
            )
            return False
        self.verified = True
        return True

    def list_failed(self, exc: ResponseError) -> None:
        """FUNCTION LIST was refused: an unchecked library is not used."""
        self._refused(exc)

    def _refused(self, exc: ResponseError) -> None:
        if _permanent(exc):
            self._turn_off(exc)
        else:
            self._paused_until = self._clock() + RETRY_AFTER

    def _turn_off(self, exc: ResponseError) -> None:
        self.enabled = False
        logger.info("Redis functions are off for this saver, it runs its scripts: %s", exc)
