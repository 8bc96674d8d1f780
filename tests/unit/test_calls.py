"""Each saver script has its builder in core/calls.py, named as the script, and the builder
mirrors the script's header (issue 28). Static: nothing is sent.

The rule a builder follows, and these tests check: one parameter per item of its header,
KEYS first (positional), then ARGV (keyword-only), in header order. An item is where the
header starts describing a position: ``KEYS[i]`` / ``ARGV[i]`` at the start of a line or
after a run of spaces (a mention inside prose, ``(ARGV[4] seconds``, is not one); a range
``ARGV[3..6]``, ``ARGV[8..]`` or ``KEYS[1..n]`` is one item (a sequence); so is each group
the header adds on a line of its own that starts with ``then`` (put_writes' triples). A group
whose count the header numbers (``ARGV[6]  h, the number of ...``) is the item at that
position, passed count first. So a builder has the header's numbered positions, a range
counting once, plus one parameter per ``then`` group; an optional tail (``N..M``) is one
parameter per position, defaulting to None (left out).

Called with generated values (a value per scalar, 4 strings for a ``Cursor``, groups of the
ARGV spec's size for a sequence, count first for a ``Counted``), every builder's keys and args
fit the header's ``Counts:`` line, with its optional tail left out or given.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable
from typing import Any

import pytest

from langgraph.checkpoint.rediskv.core import calls
from langgraph.checkpoint.rediskv.core.requests import ScriptCall
from langgraph.checkpoint.rediskv.scripts import SCRIPT_NAMES, lua_dir

from ..script_headers import Spec, header, header_counts

_ITEM = re.compile(r"(?:^[ \t]*|[ \t]{2})(KEYS|ARGV)\[(\d+)(?:\.\.\w*)?\]", re.MULTILINE)
_GROUP = re.compile(r"^  then\b", re.MULTILINE)
_BUILT_BY = re.compile(r"^  Built by: core/calls\.py (\w+)\(\)$", re.MULTILINE)


def builders() -> dict[str, Callable[..., ScriptCall]]:
    """The public functions of core/calls.py, in the order the module defines them."""
    return {
        name: value
        for name, value in vars(calls).items()
        if inspect.isfunction(value) and value.__module__ == calls.__name__
        if not name.startswith("_")
    }


def header_items(name: str) -> tuple[int, int]:
    """(KEYS items, ARGV items) the header describes before its Counts line."""
    text = header(name)
    described = text[: text.index("  Counts:")]
    starts = {(kind, int(at)) for kind, at in _ITEM.findall(described)}
    keys = sum(1 for kind, _ in starts if kind == "KEYS")
    return keys, len(starts) - keys + len(_GROUP.findall(described))


def saver_scripts() -> list[str]:
    """The scripts in lua/ but the memory store's (store_format.lua is the saver's)."""
    names = sorted(p.stem for p in lua_dir().glob("*.lua"))
    return [n for n in names if not n.startswith("store_") or n == "store_format"]


def test_one_builder_per_saver_script_in_alphabetical_order() -> None:
    assert sorted(SCRIPT_NAMES) == saver_scripts()
    assert list(builders()) == saver_scripts()
    assert len(builders()) == 27


@pytest.mark.parametrize("name", saver_scripts())
def test_the_builder_takes_one_parameter_per_header_item(name: str) -> None:
    params = list(inspect.signature(builders()[name]).parameters.values())
    keys, args = header_items(name)
    positional = [p for p in params if p.kind is p.POSITIONAL_OR_KEYWORD]
    keyword = [p for p in params if p.kind is p.KEYWORD_ONLY]
    assert (len(positional), len(keyword)) == (keys, args), [p.name for p in params]
    assert len(params) == keys + args
    # an optional tail stays last: a builder leaves out items from the first None on
    defaults = [p.default is None for p in keyword]
    assert defaults == sorted(defaults)


def _value(annotation: str, spec: Spec, groups: int) -> Any:
    size = spec.group or 1
    if annotation == "Cursor":
        return ("0", "0", "", "")
    if annotation == "Counted":
        return (groups, *["v"] * (size * groups))
    if annotation.startswith("Sequence"):
        return tuple(["v"] * (size * groups))
    return "v"


def _calls(name: str, groups: int) -> list[ScriptCall]:
    """The builder called with generated values: optional items left out, then given one
    more at a time."""
    build = builders()[name]
    keys_spec, args_spec = header_counts()[name]
    required: list[Any] = []
    named: dict[str, Any] = {}
    optional: list[str] = []
    for p in inspect.signature(build).parameters.values():
        spec = keys_spec if p.kind is p.POSITIONAL_OR_KEYWORD else args_spec
        value = _value(str(p.annotation), spec, groups)
        if p.kind is p.POSITIONAL_OR_KEYWORD:
            required.append(value)
        elif p.default is None:
            optional.append(p.name)
        else:
            named[p.name] = value
    out = []
    for given in range(len(optional) + 1):
        extra = dict.fromkeys(optional[:given], "v")
        out.append(build(*required, **named, **extra))
    return out


@pytest.mark.parametrize("name", saver_scripts())
@pytest.mark.parametrize("groups", [1, 2])
def test_a_built_call_fits_the_header_counts(name: str, groups: int) -> None:
    keys_spec, args_spec = header_counts()[name]
    for call in _calls(name, groups):
        assert call.name == name
        assert keys_spec.allows(len(call.keys)), (call.keys, keys_spec)
        assert args_spec.allows(len(call.args)), (call.args, args_spec)


def test_every_built_by_line_names_its_builder() -> None:
    names = builders()
    for path in sorted(lua_dir().glob("*.lua")):
        found = _BUILT_BY.findall(path.read_text())
        if path.stem in saver_scripts():
            # right after the Counts line, naming the script's own builder
            assert found == [path.stem], path.name
            assert re.search(r"^  Counts: .*\n  Built by: ", path.read_text(), re.MULTILINE)
        else:
            assert found == [], path.name
        assert all(n in names for n in found), path.name


def test_builders_keep_the_order_of_the_header() -> None:
    """Exact values, for a script of each shape: groups, a cursor, an optional tail, a
    count-first group, KEYS as a sequence, no KEYS."""
    assert calls.put_writes(
        "th", "wi", "w", prefix="P", tag="{T}", namespace="", checkpoint_id="1",
        ttl=0, keep_last=2, triples=("t:0", "r", "f"),
    ) == ScriptCall(
        "put_writes", ("th", "wi", "w"), ("P", "{T}", "", "1", 0, 2, "t:0", "r", "f")
    )  # fmt: skip
    assert calls.export_thread(
        "th", prefix="P", tag="{T}", cursor=("0", "0", "", ""), max_checkpoints=10,
        max_bytes=99, check="check",
    ).args == ("P", "{T}", "0", "0", "", "", 10, 99, "check")  # fmt: skip
    assert calls.reap_thread("gc", prefix="P", tag="{T}", budget=5).args == ("P", "{T}", 5)
    assert calls.reap_thread(
        "gc", prefix="P", tag="{T}", budget=5, job="copy:1", token="ab"
    ).args == ("P", "{T}", 5, "copy:1", "ab")
    assert calls.get_tuple(
        "idx", prefix="P", tag="{T}", namespace="", checkpoint_id="", read_ttl=-1,
        held=(1, "c:1", "u:b:m;"),
    ).args == ("P", "{T}", "", "", -1, 1, "c:1", "u:b:m;")  # fmt: skip
    assert calls.list_thread_candidates(
        ("a", "b"), prefix="P", max_score=b"inf", chunk=100, driver=0, cluster=""
    ) == ScriptCall("list_thread_candidates", ("a", "b"), ("P", b"inf", 100, 0, ""))
    assert calls.thread_states(list_suffix="S", thread_bounds=("tb1",)) == ScriptCall(
        "thread_states", (), ("S", "tb1")
    )
    assert calls.thread_lists("tb").args == ()
    assert calls.store_format("fmt") == ScriptCall("store_format", ("fmt",), ())
