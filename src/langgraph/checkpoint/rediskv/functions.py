"""How a saver runs the operations of a chat turn: as functions of a Redis Function library
(``FUNCTION LOAD`` once, on each primary of a cluster before its first call; ``FCALL`` per
call), else as scripts.

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
import re
import time
from collections.abc import Callable
from typing import Any

from redis.exceptions import NoPermissionError, RedisError, ResponseError

from .core import ScriptCall
from .scripts import function_library

logger = logging.getLogger(__name__)
_OFF = "Redis functions are off for this saver, it runs its scripts: %s"

# Seconds for which calls go to the scripts after a refusal that passes.
RETRY_AFTER = 30.0
# Function commands in a row that lose their connection while scripts go through, before
# functions are turned off (a proxy that drops what it does not know).
DROPS_TO_TURN_OFF = 3


def _permanent(exc: RedisError) -> bool:
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


# The name of a library of this package (scripts.function_library): one per version.
_PACKAGE_LIBRARY = re.compile(r"rediskv_[0-9a-f]{16}")


def package_libraries(listing: Any) -> dict[str, str | None]:
    """The libraries of this package's versions in a FUNCTION LIST ... WITHCODE reply: named
    as function_library names them, and holding that name's put_checkpoint function (a user's
    own library may be named rediskv_<something> too)."""
    return {
        name: code
        for name, code in listed_libraries(listing).items()
        if _PACKAGE_LIBRARY.fullmatch(name)
        and code is not None
        and f"function_name = '{name}_put_checkpoint'" in code
    }


def versions_on_server(listing: Any) -> tuple[str, list[str]]:
    """From a FUNCTION LIST LIBRARYNAME rediskv_* WITHCODE reply: whether this version's
    library is "loaded", "not loaded" or holds "other code", and the names of the libraries
    of other versions, sorted."""
    name, source, _ = function_library()
    code = listed_libraries(listing).get(name)
    state = "not loaded" if code is None else "loaded" if code == source else "other code"
    return state, sorted(set(package_libraries(listing)) - {name})


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


class FunctionLibrary:
    """The state of one saver's library on its server: whether it is used, and how."""

    def __init__(self, enabled: bool = True, clock: Callable[[], float] | None = None) -> None:
        self.name, self.source, self.names = function_library()
        self.enabled = enabled
        # the server's library holds this saver's code: loaded by it, or listed and compared
        self.verified = False
        # on a cluster, the primaries (by name) where it does: each is checked before its
        # first FCALL, so that a primary down or hung holds up no call to another
        self._verified_nodes: set[str] = set()
        self._clock = clock or time.monotonic
        self._paused_until = 0.0
        self._drops = 0  # function commands in a row that lost their connection

    def serves(self, call: ScriptCall) -> bool:
        """Whether ``call`` is to go out as an FCALL (once the library is verified)."""
        return self.enabled and call.name in self.names and self._clock() >= self._paused_until

    def ready(self, call: ScriptCall) -> bool:
        """Whether ``call`` goes out as an FCALL as it is, with no check first (a pipeline)."""
        return self.verified and self.serves(call)

    def fcall_args(self, call: ScriptCall) -> tuple[str | int | bytes | float, ...]:
        """The arguments of the FCALL command for ``call``."""
        return (self.names[call.name], len(call.keys), *call.keys, *call.args)

    def holds(self, node: str | None = None) -> bool:
        """Whether the server (on a cluster: primary ``node``) is known to hold this saver's
        library."""
        return self.verified if node is None else node in self._verified_nodes

    def call_failed(self, exc: ResponseError, node: str | None = None) -> bool:
        """Whether an FCALL's error is the library's rather than the operation's: the
        function is not there (load the library, then call again), or the server or the ACL
        does not allow functions (they are turned off: call the script). ``node``: the
        cluster primary the FCALL went to."""
        message = str(exc)
        if message.startswith("Function not found"):
            self.verified = False  # (whatever is loaded next is checked again)
            self._verified_nodes.discard(node or "")
            return True
        # (a command denied or unknown inside the function is the operation's error: the
        # server's message then names that command, not fcall)
        about_fcall = "'fcall'" in message.lower() and "script" not in message.lower()
        if about_fcall and (
            isinstance(exc, NoPermissionError) or message.lower().startswith("unknown command")
        ):
            self._turn_off(logging.INFO, _OFF, exc)
            return True
        return False

    def worked(self) -> None:
        """An FCALL went through."""
        self._drops = 0

    def node_unreachable(self, node: str) -> None:
        """On a cluster, an FCALL or a FUNCTION command could not reach primary ``node``
        (down, failing over): the call goes as a script, which follows the cluster to the
        slot's next primary or fails, and the library is checked there again before the
        next FCALL. Calls to other primaries go on as they were, and no drop is counted
        (a primary that is down fails the script too)."""
        self._verified_nodes.discard(node)

    def connection_failed(self) -> None:
        """FCALL, FUNCTION LIST or FUNCTION LOAD lost its connection: the call goes as a
        script. A proxy may drop the connection on commands it does not know; a server that
        is down fails the script too."""
        self._drops += 1
        self._paused_until = self._clock() + RETRY_AFTER

    def script_worked(self) -> None:
        """A script went through where a function command lost its connection: after
        DROPS_TO_TURN_OFF of those in a row, something between saver and server drops
        functions, and they are turned off."""
        if self._drops >= DROPS_TO_TURN_OFF:
            self._turn_off(
                logging.WARNING,
                "the connection to Redis dropped FCALL or FUNCTION commands %d times while "
                "scripts went through (a proxy?): this saver runs its scripts",
                self._drops,
            )

    def loaded(self, node: str | None = None) -> None:
        """FUNCTION LOAD took the library (on cluster primary ``node``): the server holds
        this saver's code."""
        if node is None:
            self.verified = True
        else:
            self._verified_nodes.add(node)
        self._drops = 0

    def load_failed(self, exc: ResponseError) -> bool:
        """After ``FUNCTION LOAD`` failed with ``exc``: whether a library of that name is
        there anyway (loaded first by another saver; its code is still to be compared). A
        refusal that passes sends calls to the scripts for a while; any other turns
        functions off for the saver."""
        message = str(exc)
        if message.startswith("Library ") and "already exists" in message:
            return True
        if message.startswith("Function ") and "already exists" in message:
            # another library holds a function of this saver's names: not ours to replace
            self._turn_off(
                logging.WARNING,
                "a Redis function library other than %s holds this saver's function names "
                "(%s): the saver runs its scripts; delete that library and restart the "
                "saver's process to let it load its own",
                self.name,
                exc,
            )
            return False
        self._refused(exc)
        return False

    def listed(self, listing: Any, node: str | None = None) -> bool:
        """After FUNCTION LIST LIBRARYNAME <name> WITHCODE (on cluster primary ``node``):
        whether the library holds this saver's code (when it is not there at all, it is to
        be loaded: False). A library of this name with other code turns functions off."""
        code = listed_libraries(listing).get(self.name)
        if code is None:
            return False
        if code != self.source:
            self._turn_off(
                logging.WARNING,
                "the Redis function library %s on the server is not this saver's code: "
                "the saver runs its scripts instead (delete the library, FUNCTION DELETE %s, "
                "and restart the saver's process to let it load its own)",
                self.name,
                self.name,
            )
            return False
        self.loaded(node)
        return True

    def list_failed(self, exc: RedisError) -> None:
        """FUNCTION LIST was refused (or, on a cluster, could not reach a primary): an
        unchecked library is not used."""
        self._refused(exc)

    def _refused(self, exc: RedisError) -> None:
        if _permanent(exc):
            self._turn_off(logging.INFO, _OFF, exc)
        else:
            self._paused_until = self._clock() + RETRY_AFTER

    def _turn_off(self, level: int, message: str, *args: Any) -> None:
        """Functions off for good (for this saver), and why, in the log."""
        self.enabled = False
        logger.log(level, message, *args)
