"""Output: JSON on stdout (``--json``), or tables and pretty-printed values with ``rich``."""

from __future__ import annotations

import dataclasses
import datetime
import importlib
import json
import math
import os
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from ..settings import install_hint
from .common import CliError

if TYPE_CHECKING:
    from rich.console import Console
    from rich.progress import Progress

# non-finite floats as the proto3 JSON mapping writes them: JSON has no NaN or Infinity
NON_FINITE = {"nan": "NaN", "inf": "Infinity", "-inf": "-Infinity"}


def _object(value: Any) -> Any:
    """What the serializer gives back besides plain data (messages, pydantic models,
    dataclasses, sets, datetimes, bytes ...) as data :func:`jsonable` can take further."""
    from langchain_core.messages import BaseMessage
    from pydantic import BaseModel

    if isinstance(value, BaseMessage):
        return {
            "type": value.type,
            **value.model_dump(mode="json", exclude_defaults=True, exclude={"type"}),
        }
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}
    if isinstance(value, (set, frozenset)):
        return sorted(value, key=repr)
    if isinstance(value, (datetime.datetime, datetime.date, datetime.time)):
        return value.isoformat()
    if isinstance(value, bytes):
        return value.decode("utf-8", "backslashreplace")
    return repr(value)


def _key(key: Any) -> str:
    """An object key as ``json.dumps`` writes it (``1`` -> ``"1"``, ``None`` -> ``"null"``),
    or as its repr where json.dumps refuses it (a tuple)."""
    if isinstance(key, str):
        return key
    if key is None or isinstance(key, (bool, int, float)):
        return json.dumps(key)  # NaN as "NaN": fine as a key, which is a string
    return repr(key)


def jsonable(value: Any) -> Any:
    """``value`` as plain JSON data: non-finite floats as "NaN", "Infinity" and "-Infinity",
    keys that are not strings stringified (:func:`_key`), other objects by :func:`_object`."""
    if value is None or isinstance(value, (str, bool, int)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else NON_FINITE[repr(value)]
    if isinstance(value, dict):
        return {_key(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    return jsonable(_object(value))


def to_json_text(value: Any) -> str:
    """One line of JSON for a value inside a table cell."""
    return json.dumps(jsonable(value), ensure_ascii=False, allow_nan=False)


def emit_json(data: Any) -> int:
    # allow_nan=False: should anything non-finite get through, fail rather than print NaN
    text = json.dumps(jsonable(data), indent=2, ensure_ascii=False, allow_nan=False)
    sys.stdout.write(text + "\n")
    return 0


def make_console(*, stderr: bool = False) -> Console:
    try:
        importlib.import_module("rich")
    except ImportError:
        raise CliError(
            f"the command-line tool needs the package 'rich': {install_hint('cli')} (or use --json)"
        ) from None
    from rich.console import Console

    console = Console(highlight=False, stderr=stderr)
    if not console.is_terminal and "COLUMNS" not in os.environ:
        console.width = 200  # piped output: keep table rows on one line
    return console


def human_bytes(size: int | None) -> str:
    if size is None:
        return "?"
    value = float(size)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{size} B" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")


def short_ts(ts: str | None) -> str:
    """``2025-01-02T03:04:05.678+00:00`` as ``2025-01-02 03:04:05`` (UTC)."""
    if not ts:
        return "-"
    try:
        moment = datetime.datetime.fromisoformat(ts)
    except ValueError:
        return ts
    if moment.tzinfo is not None:
        moment = moment.astimezone(datetime.timezone.utc)
    return moment.strftime("%Y-%m-%d %H:%M:%S")


def ttl_text(ttl: int | None) -> str:
    return "none" if ttl is None else f"{ttl}s"


def escape(text: str) -> str:
    from rich.markup import escape

    return escape(text)


def print_fields(console: Console, fields: Sequence[tuple[str, str]], *, markup: str = "") -> None:
    """``name  value`` lines, the values aligned (plain lines: no trailing padding)."""
    width = max(len(name) for name, _ in fields)
    for name, value in fields:
        label = f"[{markup}]{escape(name)}[/]" if markup else escape(name)
        console.print(label + " " * (width - len(name) + 2) + escape(value), soft_wrap=True)


@contextmanager
def progress_bar(enabled: bool, total: int | None, what: str) -> Iterator[Progress | None]:
    """A transient rich progress bar on stderr when it is a terminal, else nothing (total
    None: a count with no end known)."""
    if not enabled:
        yield None
        return
    console = make_console(stderr=True)
    if not console.is_terminal:
        yield None
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn

    with Progress(
        "[progress.description]{task.description}",
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        transient=True,
    ) as progress:
        progress.add_task(what, total=total)
        yield progress
