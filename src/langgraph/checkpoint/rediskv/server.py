"""A ready checkpointer for the LangGraph Agent Server (``langgraph dev``, ``langgraph up``,
LangSmith Deployment), configured from the environment.

In ``langgraph.json``::

    "checkpointer": {"path": "langgraph.checkpoint.rediskv.server.checkpointer"}

The server imports :func:`checkpointer`, calls it and enters the async context manager it
returns (once per event loop it runs graphs on), and closes it at shutdown. The settings are
read from the environment when it is entered; any bad one fails the start with a
:class:`SettingsError` that names the variable and its value, and a server that cannot be
reached fails it with :class:`RedisUnavailableError` naming the URL (password masked).

========================================  ===================================================
``REDIS_URL``                             server URL (``redis://``, ``rediss://``, ``unix://``;
                                          default ``redis://localhost:6379/0``)
``REDISKV_PREFIX``                        key prefix (default ``lg``)
``REDISKV_TTL_MINUTES``                   expiry of idle threads, minutes (default: none)
``REDISKV_TTL_REFRESH_ON_READ``           reads renew the expiry too (default ``false``)
``REDISKV_CLUSTER``                       the URL is a Redis Cluster node (default ``false``)
``REDISKV_COMPRESSION``                   ``true``, ``false`` or a zstd level 1-22
                                          (default ``true``)
``REDISKV_KEEP_LAST``                     keep only the newest N checkpoints per thread and
                                          namespace (default: keep all)
``REDISKV_INDEX_METADATA``                comma-separated metadata keys with a global index,
                                          ``none`` for none (default ``run_id``)
========================================  ===================================================

An empty variable counts as unset. A variable starting with ``REDISKV_`` that is none of
these (a typo) is refused too, so that a setting is never silently ignored.
"""

from __future__ import annotations

import logging
import math
import os
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

from redis.exceptions import RedisError

from .aio import AsyncRedisSaver
from .compression import compression_level
from .core import DEFAULT_INDEXED_METADATA
from .errors import RedisUnavailableError, SettingsError
from .keys import validate_prefix
from .settings import DEFAULT_URL, redact_url, resolve_url

__all__ = [
    "ENV_VARS",
    "ServerSettings",
    "SettingsError",
    "checkpointer",
    "settings_from_env",
]

logger = logging.getLogger(__name__)

URL_VAR = "REDIS_URL"
PREFIX_VAR = "REDISKV_PREFIX"
TTL_VAR = "REDISKV_TTL_MINUTES"
REFRESH_VAR = "REDISKV_TTL_REFRESH_ON_READ"
CLUSTER_VAR = "REDISKV_CLUSTER"
COMPRESSION_VAR = "REDISKV_COMPRESSION"
KEEP_LAST_VAR = "REDISKV_KEEP_LAST"
INDEX_VAR = "REDISKV_INDEX_METADATA"

ENV_VARS: tuple[str, ...] = (
    URL_VAR,
    PREFIX_VAR,
    TTL_VAR,
    REFRESH_VAR,
    CLUSTER_VAR,
    COMPRESSION_VAR,
    KEEP_LAST_VAR,
    INDEX_VAR,
)
_OWN_NAMESPACE = "REDISKV_"
_TRUE = frozenset({"1", "true", "yes", "on"})
_FALSE = frozenset({"0", "false", "no", "off"})


@dataclass(frozen=True)
class ServerSettings:
    """The saver's settings as read from the environment."""

    url: str = DEFAULT_URL
    url_from_env: bool = False
    prefix: str = "lg"
    ttl_minutes: float | None = None
    refresh_on_read: bool = False
    cluster: bool = False
    compression: bool | int = True
    keep_last: int | None = None
    index_metadata: tuple[str, ...] = field(default=DEFAULT_INDEXED_METADATA)

    def saver_kwargs(self) -> dict[str, Any]:
        """The keyword arguments of ``AsyncRedisSaver`` (besides the URL)."""
        ttl = (
            None
            if self.ttl_minutes is None
            else {"default_ttl": self.ttl_minutes, "refresh_on_read": self.refresh_on_read}
        )
        return {
            "prefix": self.prefix,
            "ttl": ttl,
            "cluster": self.cluster,
            "compression": self.compression,
            "keep_last": self.keep_last,
            "index_metadata": self.index_metadata,
        }

    def describe(self) -> str:
        """One line for the start-up log (password masked)."""
        source = URL_VAR if self.url_from_env else f"default, {URL_VAR} unset"
        ttl = "none" if self.ttl_minutes is None else f"{self.ttl_minutes:g} min"
        if self.ttl_minutes is not None and self.refresh_on_read:
            ttl += " (refreshed on read)"
        return (
            f"{redact_url(self.url)} ({source}), prefix {self.prefix!r}, ttl {ttl}, "
            f"cluster {self.cluster}, compression {self.compression}, "
            f"keep_last {self.keep_last}, index_metadata {list(self.index_metadata)}"
        )


def _get(environ: Mapping[str, str], name: str) -> str | None:
    value = environ.get(name)
    if value is None or not value.strip():
        return None
    return value


def _parse_bool(environ: Mapping[str, str], name: str, default: bool) -> bool:
    raw = _get(environ, name)
    if raw is None:
        return default
    word = raw.strip().lower()
    if word in _TRUE:
        return True
    if word in _FALSE:
        return False
    raise SettingsError(name, raw, "use true or false (also 1/0, yes/no, on/off)")


def _parse_positive_int(environ: Mapping[str, str], name: str, expected: str) -> int | None:
    raw = _get(environ, name)
    if raw is None:
        return None
    try:
        number = int(raw.strip())
    except ValueError:
        raise SettingsError(name, raw, expected) from None
    if number < 1:
        raise SettingsError(name, raw, expected)
    return number


def _parse_ttl(environ: Mapping[str, str]) -> float | None:
    raw = _get(environ, TTL_VAR)
    if raw is None:
        return None
    expected = "use a positive number of minutes (e.g. 60 or 0.5), or leave it unset for none"
    try:
        minutes = float(raw.strip())
    except ValueError:
        raise SettingsError(TTL_VAR, raw, expected) from None
    if not math.isfinite(minutes) or minutes <= 0:
        raise SettingsError(TTL_VAR, raw, expected)
    return minutes


def _parse_compression(environ: Mapping[str, str]) -> bool | int:
    raw = _get(environ, COMPRESSION_VAR)
    if raw is None:
        return True
    word = raw.strip().lower()
    expected = "use true (zstd level 1), false (store uncompressed) or a zstd level 1-22"
    if word in _TRUE - {"1"}:
        return True
    if word in _FALSE:
        return False
    try:
        level = int(word)
    except ValueError:
        raise SettingsError(COMPRESSION_VAR, raw, expected) from None
    try:
        compression_level(level)
    except ValueError:
        raise SettingsError(COMPRESSION_VAR, raw, expected) from None
    return level


def _parse_index(environ: Mapping[str, str]) -> tuple[str, ...]:
    raw = _get(environ, INDEX_VAR)
    if raw is None:
        return DEFAULT_INDEXED_METADATA
    if raw.strip().lower() == "none":
        return ()
    keys = [part.strip() for part in raw.split(",")]
    if not all(keys):
        raise SettingsError(
            INDEX_VAR, raw, "use metadata keys separated by commas (e.g. run_id,user_id), or none"
        )
    return tuple(dict.fromkeys(keys))


def settings_from_env(environ: Mapping[str, str] | None = None) -> ServerSettings:
    """Read and check the settings; raises :class:`SettingsError` on the first bad one."""
    env = os.environ if environ is None else environ
    unknown = sorted(
        name for name in env if name.startswith(_OWN_NAMESPACE) and name not in ENV_VARS
    )
    if unknown:
        known = ", ".join(name for name in ENV_VARS if name.startswith(_OWN_NAMESPACE))
        raise SettingsError(unknown[0], env[unknown[0]], f"unknown variable; known: {known}")

    raw_url = _get(env, URL_VAR)
    url = DEFAULT_URL if raw_url is None else raw_url.strip()
    try:
        resolve_url(url)
    except ValueError:
        raise SettingsError(
            URL_VAR,
            redact_url(url),
            "use a redis://, rediss:// or unix:// URL, e.g. redis://localhost:6379/0",
        ) from None

    raw_prefix = _get(env, PREFIX_VAR)
    prefix = "lg" if raw_prefix is None else raw_prefix
    try:
        validate_prefix(prefix)
    except ValueError:
        raise SettingsError(
            PREFIX_VAR, prefix, "use 1-64 characters from A-Z a-z 0-9 _ . - (no ':' or spaces)"
        ) from None

    ttl_minutes = _parse_ttl(env)
    refresh = _parse_bool(env, REFRESH_VAR, False)
    if refresh and ttl_minutes is None:
        raise SettingsError(
            REFRESH_VAR, env[REFRESH_VAR], f"it needs {TTL_VAR} (there is no expiry to refresh)"
        )
    cluster = _parse_bool(env, CLUSTER_VAR, False)
    index_metadata = _parse_index(env)
    if cluster and _get(env, INDEX_VAR) is not None and index_metadata:
        raise SettingsError(
            INDEX_VAR,
            env[INDEX_VAR],
            f"a cluster ({CLUSTER_VAR}) has no global metadata index; leave it unset",
        )
    return ServerSettings(
        url=url,
        url_from_env=raw_url is not None,
        prefix=prefix,
        ttl_minutes=ttl_minutes,
        refresh_on_read=refresh,
        cluster=cluster,
        compression=_parse_compression(env),
        keep_last=_parse_positive_int(
            env,
            KEEP_LAST_VAR,
            "use the number of newest checkpoints to keep per thread (1 or more), "
            "or leave it unset to keep all",
        ),
        index_metadata=index_metadata,
    )


async def _check_reachable(saver: AsyncRedisSaver, settings: ServerSettings) -> None:
    try:
        await saver.client.ping()
    except (RedisError, OSError) as exc:
        source = URL_VAR if settings.url_from_env else f"the default; {URL_VAR} is unset"
        raise RedisUnavailableError(
            f"cannot reach Redis at {redact_url(settings.url)} ({source}): {exc}"
        ) from exc


@asynccontextmanager
async def checkpointer(
    *, environ: Mapping[str, str] | None = None
) -> AsyncIterator[AsyncRedisSaver]:
    """An ``AsyncRedisSaver`` configured from the environment (see the module docstring),
    checked to reach its server, closed on exit."""
    settings = settings_from_env(environ)
    saver = AsyncRedisSaver(settings.url, **settings.saver_kwargs())
    try:
        await _check_reachable(saver, settings)
        logger.info("rediskv checkpointer: %s", settings.describe())
        yield saver
    finally:
        await saver.aclose()
