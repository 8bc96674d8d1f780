"""The canonical form of a metadata value: what a filter compares on the server.

Each metadata value is stored next to the checkpoint as one string, and a filter value matches
when its string is the same, so equal values must give equal strings in every process. The
form is JSON, with sorted keys, for the values JSON has; other values become a one-key object
``{"\\u0000<kind>": ...}`` (a NUL never starts a real metadata key) whose content does not
depend on the process:

* sets and frozensets: their elements' forms, sorted (not in hash order, which differs
  between processes with another ``PYTHONHASHSEED``);
* dicts with keys that are not strings: their (key, value) pairs, sorted;
* timezone-aware datetimes: the instant in UTC, so the same moment written in two time zones
  matches, as ``==`` says; naive datetimes stay as written, and never match aware ones;
* non-finite floats: their name (``nan`` never matches anything in Python; here it matches
  ``nan``);
* anything else the serializer accepts (dates, UUIDs, Decimals, enums, models, ...): the
  serializer's bytes, which are the same in every process for equal values of these types.

Where this differs from InMemorySaver, which compares with ``==``: values are typed, so
``True`` does not match ``1`` nor ``1.0`` (``7`` and ``7.0`` do match, as in JSON); a tuple
matches the list with the same items; ``nan`` matches ``nan``.
"""

from __future__ import annotations

import functools
import json
import math
from collections.abc import Callable
from datetime import datetime, timezone
from typing import Any

_TAG = "\0"


_SCALARS = frozenset({str, int, bool, type(None)})
# Scalars up to this long are remembered: a chat's metadata repeats its values (source,
# user_id, a run's id) from checkpoint to checkpoint.
_REMEMBERED_LENGTH = 256


def canonical(value: Any, serialized: Callable[[Any], bytes]) -> str:
    """The canonical form of ``value``; ``serialized`` gives the serializer's bytes for
    values of other types."""
    kind = type(value)
    if kind in _SCALARS and (kind is not str or len(value) <= _REMEMBERED_LENGTH):
        return _scalar(kind is bool, value)
    return json.dumps(_tree(value, serialized), sort_keys=True, separators=(",", ":"))


@functools.lru_cache(maxsize=4096)
def _scalar(is_bool: bool, value: Any) -> str:
    """(``is_bool`` is part of the cache's key: ``True == 1``, but their forms differ.)"""
    return json.dumps(value, separators=(",", ":"))


def _sort_key(tree: Any) -> str:
    return json.dumps(tree, sort_keys=True, separators=(",", ":"))


def _tree(value: Any, serialized: Callable[[Any], bytes]) -> Any:
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            return {_TAG + "float": repr(value)}
        return int(value) if value.is_integer() else value
    if isinstance(value, (list, tuple)):
        return [_tree(v, serialized) for v in value]
    if isinstance(value, dict):
        if all(isinstance(k, str) for k in value):
            return {k: _tree(v, serialized) for k, v in value.items()}
        pairs = [[_tree(k, serialized), _tree(v, serialized)] for k, v in value.items()]
        return {_TAG + "dict": sorted(pairs, key=_sort_key)}
    if isinstance(value, (set, frozenset)):
        return {_TAG + "set": sorted((_tree(v, serialized) for v in value), key=_sort_key)}
    if isinstance(value, datetime):
        if value.tzinfo is not None and value.utcoffset() is not None:
            return {_TAG + "datetime": value.astimezone(timezone.utc).isoformat()}
        return {_TAG + "naive datetime": value.isoformat()}
    return {_TAG + type(value).__qualname__: serialized(value).hex()}
