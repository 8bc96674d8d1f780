"""The Lua loader (scripts.py): each script and include names its includes on a
``-- requires:`` line; the loader emits each include once, after those it requires, refuses an
unknown name or a cycle, and a script holds exactly the includes whose helpers it reaches."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from langgraph.checkpoint.rediskv.scripts import (
    SCRIPT_NAMES,
    IncludeError,
    assemble,
    declared_requires,
    lua_dir,
    resolve_includes,
    script_includes,
    script_sources,
)
from langgraph.store.rediskv.base import STORE_SCRIPTS


def _folder(tmp_path: Path, includes: dict[str, str]) -> Path:
    (tmp_path / "include").mkdir()
    for name, requires in includes.items():
        (tmp_path / "include" / f"{name}.lua").write_text(
            f"-- requires: {requires}\nlocal function {name}_helper() end\n"
        )
    return tmp_path


def test_a_diamond_is_emitted_once_each_after_what_it_requires(tmp_path: Path) -> None:
    folder = _folder(tmp_path, {"top": "left, right", "left": "base", "right": "base", "base": ""})
    assert resolve_includes(["top"], folder) == ["base", "left", "right", "top"]
    script = "#!lua\n-- header\n-- requires: top, base\nreturn top_helper()\n"
    source = assemble(script, folder, "op.lua")
    assert source == (
        "#!lua\n-- header\n"
        "-- requires: \nlocal function base_helper() end\n"
        "-- requires: base\nlocal function left_helper() end\n"
        "-- requires: base\nlocal function right_helper() end\n"
        "-- requires: left, right\nlocal function top_helper() end\n"
        "return top_helper()\n"
    )


def test_a_cycle_is_refused_with_its_path(tmp_path: Path) -> None:
    folder = _folder(tmp_path, {"a": "b", "b": "c", "c": "a"})
    with pytest.raises(
        IncludeError, match=r"^includes require each other in a cycle: a -> b -> c -> a$"
    ):
        resolve_includes(["a"], folder)
    folder_self = tmp_path / "self"
    folder_self.mkdir()
    _folder(folder_self, {"loop": "loop"})
    with pytest.raises(IncludeError, match=r"cycle: loop -> loop$"):
        resolve_includes(["loop"], folder_self)


def test_an_unknown_include_is_refused_naming_who_requires_it(tmp_path: Path) -> None:
    folder = _folder(tmp_path, {"a": "keyschema, missing", "keyschema": ""})
    with pytest.raises(
        IncludeError,
        match=r"^include/a\.lua requires unknown include 'missing' \(no missing\.lua\)$",
    ):
        resolve_includes(["a"], folder)
    with pytest.raises(IncludeError, match=r"^op\.lua requires unknown include 'nope'"):
        assemble("-- requires: nope\nreturn 1\n", folder, "op.lua")


def test_a_file_without_one_requires_line_is_refused(tmp_path: Path) -> None:
    folder = _folder(tmp_path, {})
    with pytest.raises(IncludeError, match=r"^op\.lua must have one '-- requires:' line, has 0$"):
        assemble("return 1\n", folder, "op.lua")
    with pytest.raises(IncludeError, match=r"has 2$"):
        assemble("-- requires:\n-- requires:\nreturn 1\n", folder, "op.lua")


# --- every script holds what it reaches, and nothing else -------------------------------------

_DEFINITION = re.compile(r"^local (?:function (\w+)|(\w+) *=)", re.MULTILINE)


def _code(text: str) -> str:
    """Lua without comments and string literals (a helper's name in either is no use of it)."""
    text = re.sub(r"--\[\[.*?\]\]", "", text, flags=re.DOTALL)
    text = re.sub(r"--[^\n]*", "", text)
    return re.sub(r'"(?:[^"\\\n]|\\.)*"|\'(?:[^\'\\\n]|\\.)*\'', '""', text)


def _helpers() -> dict[str, tuple[str, str]]:
    """Each top-level helper of the includes: the include defining it, and its code."""
    helpers: dict[str, tuple[str, str]] = {}
    for path in sorted((lua_dir() / "include").glob("*.lua")):
        code = _code(path.read_text())
        found = list(_DEFINITION.finditer(code))
        for j, match in enumerate(found):
            end = found[j + 1].start() if j + 1 < len(found) else len(code)
            name = match.group(1) or match.group(2)
            helpers[name] = (path.stem, code[match.start() : end])
    return helpers


_LOCALS = re.compile(
    r"\blocal (?!function)([\w ,]+)|\bfunction[\w.: ]*\(([\w ,.]*)\)|\bfor ([\w ,]+?) (?:in|=)"
)


def _used(code: str, helpers: dict[str, tuple[str, str]]) -> set[str]:
    """The helpers a piece of code names, less names it declares itself (a parameter or a
    local called `record` is no use of the helper record)."""
    shadowed = {
        word
        for match in _LOCALS.finditer(code)
        for group in match.groups()
        if group
        for word in re.findall(r"\w+", group)
    }
    words = set(re.findall(r"(?<![\w.:])([A-Za-z_]\w*)", code))
    return {word for word in words if word in helpers and word not in shadowed}


def test_every_requires_line_names_exactly_the_includes_whose_helpers_the_file_calls() -> None:
    """Declared = used, for every include and every script: so a script holds the includes it
    reaches through the helpers it calls, and no other (nor one helper it lacks)."""
    helpers = _helpers()
    assert len(helpers) == 144  # (the parse found the helpers)
    files = [(f"include/{path.stem}.lua", path) for path in (lua_dir() / "include").glob("*.lua")]
    files += [(f"{name}.lua", lua_dir() / f"{name}.lua") for name in SCRIPT_NAMES]
    files += [(f"{name}.lua", lua_dir() / f"{name}.lua") for name in STORE_SCRIPTS]
    for where, path in files:
        text = path.read_text()
        own = {name for name, (include, _) in helpers.items() if f"include/{include}.lua" == where}
        used = {helpers[helper][0] for helper in _used(_code(text), helpers) - own}
        assert set(declared_requires(text, where)) == used, where


def test_each_script_holds_each_include_it_reaches_once() -> None:
    for name in SCRIPT_NAMES:
        includes = script_includes()[name]
        assert len(includes) == len(set(includes)), name
        for include in includes:
            text = (lua_dir() / "include" / f"{include}.lua").read_text().rstrip("\n")
            assert script_sources()[name].count(text) == 1, (name, include)


def test_the_big_includes_are_split() -> None:
    assert sorted(path.stem for path in (lua_dir() / "include").glob("*.lua")) == [
        "delta", "drop", "expiry", "indexes", "jobs", "keyschema", "ledger", "lists", "reap",
        "reap_prune", "reap_runs", "reap_ttl", "reap_whole", "record", "records", "refs",
        "registry", "replies", "store_purge", "store_write", "trim", "walk",
    ]  # fmt: skip
    assert script_includes()["delete_thread"][:2] == ["keyschema", "jobs"]
    assert script_includes()["run_threads"] == ["replies", "keyschema"]
    assert script_includes()["get_write_paths"] == ["keyschema", "record"]
