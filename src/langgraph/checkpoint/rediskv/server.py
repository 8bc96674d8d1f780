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
import os
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

from redis.exceptions import RedisError

from .aio import AsyncRedisSaver
from .core import DEFAULT_INDEXED_METADATA
from .errors import RedisUnavailableError, SettingsError
from .options import ENV_VARS, URL_VAR, SaverSettings, env_kwargs
from .settings import DEFAULT_URL, redact_url

__all__ = [
    "ENV_VARS",
    "ServerSettings",
    "SettingsError",
    "checkpointer",
    "settings_from_env",
]

logger = logging.getLogger(__name__)


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


def settings_from_env(environ: Mapping[str, str] | None = None) -> ServerSettings:
    """Read and check the settings; raises :class:`SettingsError` on the first bad one."""
    return ServerSettings(**env_kwargs(os.environ if environ is None else environ))


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
    saver = AsyncRedisSaver.from_settings(
        SaverSettings.from_kwargs(settings.url, **settings.saver_kwargs())
    )
    try:
        await _check_reachable(saver, settings)
        logger.info("rediskv checkpointer: %s", settings.describe())
        yield saver
    finally:
        await saver.aclose()
