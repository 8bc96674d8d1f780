"""Validation of the saver's settings (URL, TTL), done once at construction."""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from datetime import timedelta
from typing import Any
from urllib.parse import urlsplit, urlunsplit

DEFAULT_URL = "redis://localhost:6379/0"
DISTRIBUTION = "langgraph-checkpoint-rediskv"
_SCHEMES = ("redis", "rediss", "unix")


def resolve_url(url: str | None) -> str:
    """``url``, else ``$REDIS_URL``, else the local default; the scheme is checked."""
    resolved = url or os.environ.get("REDIS_URL") or DEFAULT_URL
    scheme = urlsplit(resolved).scheme
    if scheme not in _SCHEMES:
        raise ValueError(
            f"unsupported Redis URL {redact_url(resolved)!r}: the scheme must be one of "
            + ", ".join(f"{s}://" for s in _SCHEMES)
        )
    return resolved


def redact_url(url: str) -> str:
    """The URL without its password, for error messages."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.replace(f":{parts.password}@", ":***@")
    return urlunsplit(parts._replace(netloc=netloc))


@dataclass(frozen=True, slots=True)
class TTLSettings:
    """Expiry of a thread's keys: ``seconds`` after its last write (or read, when
    ``refresh_on_read``)."""

    seconds: int
    refresh_on_read: bool = False


def parse_ttl(ttl: Any) -> TTLSettings | None:
    """Accept ``{"default_ttl": minutes | timedelta, "refresh_on_read": bool}`` (the shape of
    langgraph-checkpoint-redis), a bare ``timedelta``, or ``None`` for no expiry."""
    if ttl is None:
        return None
    if isinstance(ttl, timedelta):
        ttl = {"default_ttl": ttl}
    if not isinstance(ttl, dict):
        raise ValueError(
            f"invalid ttl {ttl!r}: expected None, a timedelta, or a dict like "
            '{"default_ttl": 60, "refresh_on_read": True} (default_ttl in minutes)'
        )
    unknown = set(ttl) - {"default_ttl", "refresh_on_read"}
    if unknown:
        raise ValueError(
            f"invalid ttl: unknown key(s) {sorted(unknown)}; use default_ttl and refresh_on_read"
        )
    if ttl.get("default_ttl") is None:
        return None
    seconds = ttl_seconds(ttl["default_ttl"], "default_ttl")
    refresh = ttl.get("refresh_on_read", False)
    if not isinstance(refresh, bool):
        raise ValueError(f"invalid ttl: refresh_on_read must be True or False, not {refresh!r}")
    return TTLSettings(seconds=seconds, refresh_on_read=refresh)


def ttl_seconds(value: Any, what: str = "ttl") -> int:
    """Minutes (int or float) or a timedelta, as whole seconds (at least 1)."""
    if isinstance(value, timedelta):
        seconds = value.total_seconds()
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        seconds = float(value) * 60
    else:
        raise ValueError(
            f"invalid ttl: {what} must be minutes (int or float) or a timedelta, "
            f"not {type(value).__name__}"
        )
    if not math.isfinite(seconds) or seconds <= 0:
        raise ValueError(f"invalid ttl: {what} must be positive, got {value!r}")
    return max(1, math.ceil(seconds))


def parse_keep_last(keep_last: Any) -> int:
    """``keep_last`` as put_checkpoint's argument: a positive int, or 0 for no limit."""
    if keep_last is None:
        return 0
    if isinstance(keep_last, int) and not isinstance(keep_last, bool) and keep_last >= 1:
        return keep_last
    raise ValueError(
        f"invalid keep_last {keep_last!r}: use None to keep every checkpoint, or the number "
        "of newest checkpoints to keep per thread and namespace (1 or more)"
    )


ON_LOST_CHECKPOINT = ("raise", "fall_back")


def parse_on_lost_checkpoint(value: Any) -> str:
    """``on_lost_checkpoint``: "raise" or "fall_back" (README, Eviction)."""
    if value in ON_LOST_CHECKPOINT:
        return str(value)
    raise ValueError(
        f"invalid on_lost_checkpoint {value!r}: use 'raise' (CheckpointLostError, the default) "
        "or 'fall_back' (the newest checkpoint still complete, with a warning)"
    )


def install_hint(extra: str) -> str:
    """The pip command that adds ``extra`` to this installation: from the clone this package
    runs from (an editable install), else by name (the package is not on PyPI yet: from a
    clone or a wheel file)."""
    from pathlib import Path

    root = Path(__file__).resolve().parents[4]
    project = root / "pyproject.toml"
    if project.is_file() and f'name = "{DISTRIBUTION}"' in project.read_text():
        return f"pip install -e '{root}[{extra}]'"
    return (
        f"pip install '{DISTRIBUTION}[{extra}]' (from a clone: pip install -e "
        f"'/path/to/clone[{extra}]'; from a wheel: pip install '/path/to/the.whl[{extra}]')"
    )
