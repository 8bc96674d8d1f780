"""Loading the Lua scripts from the ``lua/`` folder.

A script may say ``-- @include NAME`` on a line of its own; the loader replaces that line with
``lua/include/NAME.lua``. Redis sees one self-contained script per operation, and the helpers
they share are written once.
"""

from __future__ import annotations

import functools
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
    "register_metadata_index",
    "reindex_thread",
    "enter_thread_list",
    "sweep_thread_list",
    "thread_list_registry",
    "thread_lists",
    "thread_states",
    "run_threads",
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


@functools.cache
def script_sources() -> dict[str, str]:
    """The source of every script, includes inlined, by operation name."""
    folder = _lua_dir()

    def inline(match: re.Match[str]) -> str:
        return (folder / "include" / f"{match.group(1)}.lua").read_text()

    return {
        name: _INCLUDE.sub(inline, (folder / f"{name}.lua").read_text()) for name in SCRIPT_NAMES
    }
