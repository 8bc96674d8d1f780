"""Loading the Lua scripts from the ``lua/`` folder.

Every script and every include (``lua/include/NAME.lua``) names the includes it uses on a line
of its own, ``-- requires: keyschema, refs`` (empty when it needs none). The loader resolves
them transitively and puts each include once, in dependency order, in place of the script's
line: Redis sees one self-contained script per operation, defining only the helpers that
script reaches. An unknown name or a cycle is refused with an error that names it.
"""

from __future__ import annotations

import functools
import hashlib
import re
from importlib import resources
from pathlib import Path

from .errors import IncludeError as IncludeError  # (re-exported: the loader raises it)

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
    "thread_deadlines",
    "thread_lists",
    "thread_states",
    "run_threads",
    "store_format",
)

_REQUIRES = re.compile(r"^-- requires:(.*)$", re.MULTILINE)


def lua_dir() -> Path:
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


def declared_requires(text: str, where: str) -> list[str]:
    """The names on the ``-- requires:`` line of a script or include (``where`` names the file
    in errors)."""
    lines = _REQUIRES.findall(text)
    if len(lines) != 1:
        raise IncludeError(f"{where} must have one '-- requires:' line, has {len(lines)}")
    return [name.strip() for name in lines[0].split(",") if name.strip()]


def resolve_includes(roots: list[str], folder: Path, where: str = "script") -> list[str]:
    """The includes ``roots`` need, transitively, each once, every one after those it requires
    (depth first, in the order the lines name them)."""
    ordered: list[str] = []
    visiting: list[str] = []

    def visit(name: str, wanted_by: str) -> None:
        if name in ordered:
            return
        if name in visiting:
            cycle = " -> ".join([*visiting[visiting.index(name) :], name])
            raise IncludeError(f"includes require each other in a cycle: {cycle}")
        path = folder / "include" / f"{name}.lua"
        if not path.is_file():
            raise IncludeError(f"{wanted_by} requires unknown include {name!r} (no {path.name})")
        visiting.append(name)
        for needed in declared_requires(path.read_text(), f"include/{name}.lua"):
            visit(needed, f"include/{name}.lua")
        visiting.pop()
        ordered.append(name)

    for root in roots:
        visit(root, where)
    return ordered


def assemble(text: str, folder: Path, where: str) -> str:
    """A script's source with its ``-- requires:`` line replaced by the includes it needs."""
    includes = resolve_includes(declared_requires(text, where), folder, where)
    parts = [(folder / "include" / f"{name}.lua").read_text().rstrip("\n") for name in includes]
    match = _REQUIRES.search(text)
    assert match is not None  # declared_requires found it
    return text[: match.start()] + "\n".join(parts) + text[match.end() :]


def include_sources(*names: str) -> str:
    """The source of includes ``names`` with every include they require, each once, in
    dependency order: what a script that requires them holds (tests run Lua helpers alone)."""
    folder = lua_dir()
    return "\n".join(
        (folder / "include" / f"{name}.lua").read_text()
        for name in resolve_includes(list(names), folder, "include_sources")
    )


@functools.cache
def script_includes() -> dict[str, list[str]]:
    """The includes each script's source holds, in the order it holds them, by operation."""
    folder = lua_dir()
    return {
        name: resolve_includes(
            declared_requires((folder / f"{name}.lua").read_text(), f"{name}.lua"),
            folder,
            f"{name}.lua",
        )
        for name in SCRIPT_NAMES
    }


@functools.cache
def script_sources() -> dict[str, str]:
    """The source of every script, includes inlined, by operation name."""
    folder = lua_dir()
    return {
        name: assemble((folder / f"{name}.lua").read_text(), folder, f"{name}.lua")
        for name in SCRIPT_NAMES
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
    folder = lua_dir()
    roots: list[str] = []
    bodies: dict[str, tuple[str, str]] = {}
    for name in FUNCTION_OPS:
        text = (folder / f"{name}.lua").read_text()
        shebang = _SHEBANG.match(text)
        if shebang is None:
            raise ValueError(f"lua/{name}.lua does not start with a #!lua line")
        flags = [flag for flag in (shebang.group(1) or "").split(",") if flag]
        body = text[shebang.end() :]
        roots += declared_requires(body, f"{name}.lua")
        bodies[name] = (_REQUIRES.sub("", body), ", ".join(f"'{flag}'" for flag in flags))
    # every include any of the operations needs, once, in an order that suits them all
    includes = resolve_includes(roots, folder, "the function library")
    parts = [(folder / "include" / f"{include}.lua").read_text() for include in includes]
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
