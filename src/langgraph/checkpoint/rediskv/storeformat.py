"""The stored format of a prefix, and which releases may read it.

A prefix may hold ``P:fmt``: the lowest release of this package that reads what is stored
under it. Without it the store is in the format of 0.1.0 (the first release, which knows no
``P:fmt``), and so is everything this release writes: 0.1.0 and this release run side by side
on one prefix (tests/e2e/test_compat.py). A release whose writes an earlier release would misread
sets ``P:fmt`` to itself before it writes them (raising it, never lowering it). A saver reads
``P:fmt`` once, at its first call (``lua/store_format.lua``), and refuses the prefix if it
needs a later release than this one, before it reads or writes anything of it.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any, TypeVar

from .core import Op, SaverCore, calls
from .errors import StoreFormatError as StoreFormatError  # (re-exported)

T = TypeVar("T")

# this release (pyproject.toml's version: tests/integration/test_store_format.py checks)
RELEASE = "0.2.0"
# the lowest release that reads what this release writes, which P:fmt says when it is later
# than 0.1.0: 0.1.0 reads every key and record that 0.2.0 writes (tests/e2e/test_compat.py)
WRITES_FORMAT = "0.1.0"


def release_tuple(release: str) -> tuple[int, ...]:
    """``"0.10.1"`` -> ``(0, 10, 1)``; a ValueError for anything but dotted numbers."""
    parts = release.split(".")
    if not all(part.isdigit() for part in parts):
        raise ValueError(f"not a release number: {release!r}")
    return tuple(int(part) for part in parts)


def check_store_format(core: SaverCore) -> Op[None]:
    """Read the prefix's format; raise StoreFormatError if it needs a later release than
    this one. Once per saver."""
    key = core.keys.format_key()
    reply: Any = yield calls.store_format(key)
    if reply:
        stored = reply.decode() if isinstance(reply, bytes) else str(reply)
        try:
            needed = release_tuple(stored)
        except ValueError:
            raise StoreFormatError(
                f"the prefix {core.keys.prefix!r} has a stored format {stored!r} (key {key}) "
                f"that langgraph-checkpoint-rediskv {RELEASE} does not know: it should be the "
                "lowest release that reads the store, such as '0.1.0'"
            ) from None
        if needed > release_tuple(RELEASE):
            raise StoreFormatError(
                f"the prefix {core.keys.prefix!r} holds checkpoints in a format that needs "
                f"langgraph-checkpoint-rediskv {stored} or later (key {key}); this is "
                f"{RELEASE}, which could misread them: run {stored} or later on every app "
                "server of this prefix (README: Upgrades)"
            )
    core.format_checked.append(True)


def checked_first(core: SaverCore, op: Generator[Any, Any, T]) -> Generator[Any, Any, T]:
    """``op`` after the check of the prefix's format (the transports wrap a saver's calls in
    this until one check has passed; a call's requests and replies pass through)."""
    if not core.format_checked:
        yield from check_store_format(core)
    return (yield from op)
