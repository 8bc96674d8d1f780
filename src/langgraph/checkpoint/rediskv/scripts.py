"""Loading the Lua scripts from the ``lua/`` folder.

A script may say ``-- @include NAME`` on a line of its own; the loader replaces that line with
``lua/include/NAME.lua``. Redis sees one self-contained script per operation, and the helpers
they share are written once.
"""

from __future__ import annotations

import functools
import hashlib
import re
from importlib import resources
from pathlib import Path

SCRIPT_NAMES = (
    "put_checkpoint",
    "put_writes",
    "get_tuple",
    "list_checkpoints",
    "list_indexed",
    "list_thread_candidates",
    "delete_thread",
    "delete_for_runs",
    "prune",
    "export_thread",
    "import_thread",
    "set_thread_ttl",
    "check_thread",
    "reap_thread",
    "get_delta_channel_history",
    "get_kept_checkpoint",
    "get_write_paths",
    "register_metadata_index",
    "reindex_thread",
    "enter_thread_list",
    "sweep_thread_list",
    "thread_list_registry",
    "thread_lists",
    "thread_states",
    "run_threads",
    "store_format",
)

_INCLUDE = re.compile(r"^-- @include (\w+)$", re.MULTILINE)


def _lua_dir() -> Path:
    """``lua/`` inside the installed wheel, else the repository's top-level ``lua/``."""
    packaged = Path(str(resources.files(__package__ or __name__))) / "lua"
    if packaged.is_dir():
        return packaged
    repo = Path(__file__).resolve().parents[4] / "lua"
    if repo.is_dir():
        return repo
    raise FileNotFoundError(
        f"the Lua scripts are missing: looked in {packaged} and {repo}; reinstall the package"
    )


def _include_source(folder: Path, name: str) -> str:
    return (folder / "include" / f"{name}.lua").read_text()


@functools.cache
def script_sources() -> dict[str, str]:
    """The source of every script, includes inlined, by operation name."""
    folder = _lua_dir()

    def inline(match: re.Match[str]) -> str:
        return _include_source(folder, match.group(1))

    return {
        name: _INCLUDE.sub(inline, (folder / f"{name}.lua").read_text()) for name in SCRIPT_NAMES
    }


# The operations a chat turn makes, and a page of a thread's history, loaded as a Redis
# Function library as well (FUNCTION LOAD, then FCALL): an EVALSHA runs the whole script anew,
# making a closure for every helper its includes define (some 60 for a put); a library's
# helpers are made once, at load.
FUNCTION_OPS = ("put_checkpoint", "put_writes", "get_tuple", "list_checkpoints")

_SHEBANG = re.compile(r"\A#!lua(?: flags=([\w,-]*))?\n")


@functools.cache
def function_library() -> tuple[str, str, dict[str, str]]:
    """The library's name, its source and each operation's function name in it, all named after
    the digest of the source, so that savers of other versions on one server each find their
    own (a library of the same name is the same code)."""
    folder = _lua_dir()
    includes: list[str] = []
    bodies: dict[str, tuple[str, str]] = {}
    for name in FUNCTION_OPS:
        text = (folder / f"{name}.lua").read_text()
        shebang = _SHEBANG.match(text)
        if shebang is None:
            raise ValueError(f"lua/{name}.lua does not start with a #!lua line")
        flags = [flag for flag in (shebang.group(1) or "").split(",") if flag]
        body = text[shebang.end() :]
        for include in _INCLUDE.findall(body):
            if include not in includes:
                includes.append(include)
        bodies[name] = (_INCLUDE.sub("", body), ", ".join(f"'{flag}'" for flag in flags))
    parts = [_include_source(folder, include) for include in includes]
    # the callbacks' parameters are named KEYS and ARGV: the bodies read them as scripts do
    template = (
        "redis.register_function{{function_name = '{fn}', flags = {{ {flags} }},\n"
        "  callback = function(KEYS, ARGV)\n{body}\nend}}\n"
    )
    unnamed = "\n".join(parts) + "".join(
        template.format(fn=f"@{name}", flags=flags, body=body)
        for name, (body, flags) in bodies.items()
    )
    digest = hashlib.sha1(unnamed.encode()).hexdigest()[:16]
    library = f"rediskv_{digest}"
    names = {name: f"{library}_{name}" for name in FUNCTION_OPS}
    source = f"#!lua name={library}\n" + unnamed.replace(
        "function_name = '@", f"function_name = '{library}_"
    )
    return library, source, names
