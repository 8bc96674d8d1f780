"""The function library within Lua 5.1's limits, with room to grow: the server compiles the
library in one chunk, whose includes are its top-level locals (at most 200 per function), and
each operation's callback holds the includes it reaches as upvalues (at most 60). A library
over either limit fails to load; the saver then runs its scripts, about 60,000 server
instructions more per call (functions.py), and says so only in a log line. Compiled here with
lupa's Lua 5.1 (fakeredis's), so the figures are the compiler's own."""

from __future__ import annotations

from typing import Any

from lupa import lua51

from langgraph.checkpoint.rediskv.scripts import function_library

MAX_LOCALS = 200  # Lua 5.1's LUAI_MAXVARS
MAX_UPVALUES = 60  # Lua 5.1's LUAI_MAXUPVALUES
ROOM = 10  # what a change may take before this test asks for a smaller library


def _library() -> tuple[str, str]:
    """The includes (the main chunk's locals) and the registrations, without the #!lua line."""
    _, source, _ = function_library()
    body = source.split("\n", 1)[1]
    at = body.index("redis.register_function")
    return body[:at], body[at:]


def _compiles(lua: Any, code: str) -> bool:
    return bool(lua.eval("function(code) return loadstring(code) ~= nil end")(code))


def test_the_librarys_main_chunk_has_room_for_more_locals() -> None:
    lua = lua51.LuaRuntime()
    includes, registrations = _library()
    assert _compiles(lua, includes + registrations)
    # the most locals that can still be added at the end of the includes: 200 less those used
    low, high = 0, MAX_LOCALS
    while low < high:
        n = (low + high + 1) // 2
        extra = "".join(f"local extra_{j} = {j}\n" for j in range(n))
        low, high = (n, high) if _compiles(lua, includes + extra + registrations) else (low, n - 1)
    used = MAX_LOCALS - low
    assert low >= ROOM, f"the library's includes hold {used} top-level locals of {MAX_LOCALS}"
    assert used == 108  # (today's figure: a change that adds includes updates it)


def test_each_operation_holds_its_includes_in_fewer_upvalues_than_lua_allows() -> None:
    lua = lua51.LuaRuntime()
    includes, registrations = _library()
    callbacks = lua.eval("{}")
    register = lua.eval(
        "function(into) return function(spec) into[spec.function_name] = spec.callback end end"
    )(callbacks)
    lua.globals().redis = lua.eval("{}")
    lua.globals().redis.register_function = register
    lua.execute(includes + registrations)
    count = lua.eval("function(f) return debug.getinfo(f, 'u').nups end")
    # (function names "rediskv_<digest>_<operation>")
    upvalues = {str(name).split("_", 2)[2]: int(count(f)) for name, f in callbacks.items()}
    assert max(upvalues.values()) <= MAX_UPVALUES - ROOM, f"upvalues per operation: {upvalues}"
    # (today's figures: a change that makes an operation reach more includes updates them)
    assert upvalues == {
        "put_checkpoint": 36,
        "put_writes": 10,
        "get_tuple": 11,
        "list_checkpoints": 12,
    }
