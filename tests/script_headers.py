"""The headers of the Lua scripts, read as data: each has a line
``Counts: KEYS <n>; ARGV <spec>``, where a spec is ``N`` (exactly), ``N+Kn`` (N, then groups
of K), ``N..`` (N or more: a list, or groups whose size a count argument gives) or ``N..M``
(N to M: trailing arguments some modes leave out). tests/integration/test_script_arity.py
holds the calls the savers send to it, tests/unit/test_calls.py the builders of core/calls.py;
tests/store/test_store_scripts.py the store's scripts (with ``redis_calls``: the keys each
touches)."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from langgraph.checkpoint.rediskv.scripts import SCRIPT_NAMES, lua_dir

_COUNTS = re.compile(r"^  Counts: KEYS (\S+); ARGV (\S+)$", re.MULTILINE)
_SPEC = re.compile(r"(\d+)(?:\+(\d+)n|(\.\.)(\d*))?")


@dataclass(frozen=True)
class Spec:
    """How many arguments a script takes: `fixed`, then any number of groups of `group`
    (0: none), or up to `most` (None: no bound)."""

    fixed: int
    group: int = 0
    most: int | None = 0

    @classmethod
    def parse(cls, text: str) -> Spec:
        match = _SPEC.fullmatch(text)
        assert match, text
        fixed = int(match.group(1))
        if match.group(2):
            return cls(fixed, int(match.group(2)), None)
        if match.group(3):
            return cls(fixed, 0, int(match.group(4)) if match.group(4) else None)
        return cls(fixed, 0, fixed)

    def declared(self) -> int:
        """The highest position the header must describe one by one."""
        return self.most if self.most is not None and self.most > self.fixed else self.fixed

    def allows(self, count: int) -> bool:
        if count < self.fixed:
            return False
        if self.group:
            return (count - self.fixed) % self.group == 0
        return self.most is None or count <= self.most


def header(name: str) -> str:
    """The header comment of ``lua/<name>.lua``."""
    text = (lua_dir() / f"{name}.lua").read_text()
    return text[text.index("--[[") : text.index("]]")]


def header_counts(names: Iterable[str] = SCRIPT_NAMES) -> dict[str, tuple[Spec, Spec]]:
    """(KEYS spec, ARGV spec) of each saver script (or of the scripts ``names``: the
    store's are ``langgraph.store.rediskv.base.STORE_SCRIPTS``)."""
    counts = {}
    for name in names:
        found = _COUNTS.findall(header(name))
        assert len(found) == 1, name
        counts[name] = (Spec.parse(found[0][0]), Spec.parse(found[0][1]))
    return counts


_REDIS_CALL = re.compile(r"redis\.p?call\(\s*\"([A-Za-z]+)\"\s*(?:,\s*([^,)]+))?")


def redis_calls(source: str) -> list[tuple[str, str]]:
    """(command, its first argument as written) of each ``redis.call`` of a script's source
    (includes inlined: ``scripts.assemble``); the argument is "" for a command without."""
    return [
        (command.upper(), (first or "").strip()) for command, first in _REDIS_CALL.findall(source)
    ]
