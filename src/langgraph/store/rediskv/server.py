"""A ready long-term memory store for the LangGraph Agent Server (``langgraph dev``,
``langgraph up``, LangSmith Deployment), next to the checkpointer of
:mod:`langgraph.checkpoint.rediskv.server`.

In ``langgraph.json``, with the same ``ttl`` and ``index`` keys as the server's own store::

    "store": {
        "path": "langgraph.store.rediskv.server.store",
        "ttl": {"default_ttl": 1440, "refresh_on_read": true, "sweep_interval_minutes": 60},
        "index": {"dims": 1536, "embed": "openai:text-embedding-3-small", "fields": ["$"]}
    }

The server imports :func:`store`, calls it and enters the async context manager it returns
on its first use of the store, and closes it at shutdown. ``ttl`` and ``index`` come from that
section (the server hands it over as ``$LANGGRAPH_STORE``): an ``embed`` that names a Python
file (``"./embeddings.py:embed"``, a function or LangChain ``Embeddings``) is loaded from the
deployment's directory, as the server loads its own; a ``"provider:model"`` goes to
LangChain's ``init_embeddings``. With ``sweep_interval_minutes``
a task frees expired items every that many minutes. ``REDIS_URL`` names the Redis server (as
for the checkpointer; with ``REDISKV_CLUSTER=true``, a node of a Redis Cluster, for both) and
``REDISKV_STORE_PREFIX`` the key prefix (default ``store``). A bad setting fails the start
with a :class:`SettingsError` naming it (``REDISKV_CLUSTER`` too, when the server is no
cluster), a server that cannot be reached with :class:`RedisUnavailableError` naming the URL
(password masked).
"""

from __future__ import annotations

import importlib.util
import json
import logging
import os
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from typing import Any

from redis.exceptions import RedisClusterException, RedisError

from langgraph.checkpoint.rediskv.base import cluster_failure
from langgraph.checkpoint.rediskv.errors import RedisUnavailableError, SettingsError
from langgraph.checkpoint.rediskv.options import (
    CLUSTER_VAR,
    STORE_PREFIX_VAR,
    URL_VAR,
    env_kwargs,
)
from langgraph.checkpoint.rediskv.settings import redact_url

from . import AsyncRedisStore
from .base import store_config

__all__ = ["STORE_CONFIG_VAR", "SettingsError", "store", "store_kwargs_from_env"]

logger = logging.getLogger(__name__)

# the server's store section of langgraph.json, as langgraph-api hands it to the process
STORE_CONFIG_VAR = "LANGGRAPH_STORE"
DEFAULT_STORE_PREFIX = "store"


def store_kwargs_from_env(environ: Mapping[str, str] | None = None) -> dict[str, Any]:
    """``AsyncRedisStore``'s arguments from the environment: ``url``, ``prefix``, ``cluster``
    (``$REDISKV_CLUSTER``, the checkpointer's: only when true), and ``ttl`` and ``index`` from
    ``$LANGGRAPH_STORE``. Raises :class:`SettingsError` on the first bad setting (an
    ``index`` whose ``embed`` cannot be loaded included)."""
    env = os.environ if environ is None else environ
    saver = env_kwargs(env)  # (REDIS_URL checked as for the checkpointer; REDISKV_* typos too)
    prefix = (env.get(STORE_PREFIX_VAR) or "").strip() or DEFAULT_STORE_PREFIX
    if ":" in prefix or "{" in prefix or "}" in prefix:
        raise SettingsError(STORE_PREFIX_VAR, prefix, "use a prefix without ':', '{' or '}'")
    section = _store_section(env)
    kwargs: dict[str, Any] = {"url": saver["url"], "prefix": prefix}
    if saver["cluster"]:
        kwargs["cluster"] = True
    if section.get("ttl") is not None:
        try:
            store_config(prefix, section["ttl"])
        except ValueError as exc:
            raise SettingsError(STORE_CONFIG_VAR, env[STORE_CONFIG_VAR], str(exc)) from None
        kwargs["ttl"] = section["ttl"]
    if section.get("index") is not None:
        kwargs["index"] = _index_config(env, section["index"])
    return kwargs


def _store_section(env: Mapping[str, str]) -> dict[str, Any]:
    raw = (env.get(STORE_CONFIG_VAR) or "").strip()
    if not raw:
        return {}
    try:
        section = json.loads(raw)
    except ValueError:
        raise SettingsError(STORE_CONFIG_VAR, raw, "not JSON (langgraph.json's store)") from None
    if not isinstance(section, dict):
        raise SettingsError(STORE_CONFIG_VAR, raw, "not an object (langgraph.json's store)")
    return section


def _index_config(env: Mapping[str, str], index: Any) -> dict[str, Any]:
    raw = env.get(STORE_CONFIG_VAR, "")
    if not isinstance(index, dict) or "dims" not in index or "embed" not in index:
        raise SettingsError(STORE_CONFIG_VAR, raw, 'index needs "dims" and "embed"')
    embed = index["embed"]
    if isinstance(embed, str) and ".py:" in embed:
        # a function in a file of the deployment, relative to its directory (as the server
        # loads its own store's): loaded here, its errors named
        path, name = embed.rsplit(":", 1)
        try:
            spec = importlib.util.spec_from_file_location(f"rediskv_embed_{abs(hash(path))}", path)
            if spec is None or spec.loader is None:
                raise FileNotFoundError(f"no such file: {path}")
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            embed = getattr(module, name)
        except Exception as exc:  # (any error of the user's module: named, not swallowed)
            raise SettingsError(STORE_CONFIG_VAR, raw, f"embed {index['embed']!r}: {exc}") from exc
    return {**index, "embed": embed}


@asynccontextmanager
async def store() -> AsyncIterator[AsyncRedisStore]:
    """The Agent Server's store: an :class:`AsyncRedisStore` configured from the environment
    (see the module's docstring), its TTL sweeper running when ``sweep_interval_minutes`` is
    set, closed when the server shuts down."""
    kwargs = store_kwargs_from_env()
    url = kwargs.pop("url")
    try:
        memory = AsyncRedisStore(url, **kwargs)  # (a cluster's client connects at its ping)
    except ValueError as exc:
        # (a client that decodes replies comes of the URL's options; the rest, of the index)
        if "decode_responses" in str(exc):
            raise SettingsError(URL_VAR, redact_url(url), str(exc)) from exc
        raise SettingsError(
            STORE_CONFIG_VAR, os.environ.get(STORE_CONFIG_VAR, ""), str(exc)
        ) from exc
    try:
        try:
            await memory.client.ping()
        except (RedisError, OSError, RedisClusterException) as exc:
            if isinstance(exc, RedisClusterException) and isinstance(
                cluster_failure(url, exc), ValueError
            ):  # (the server is no cluster)
                raise SettingsError(
                    CLUSTER_VAR, os.environ[CLUSTER_VAR], str(cluster_failure(url, exc))
                ) from exc
            source = URL_VAR if os.environ.get(URL_VAR) else f"the default; {URL_VAR} is unset"
            raise RedisUnavailableError(
                f"cannot reach Redis at {redact_url(url)} ({source}): {exc}"
            ) from exc
        ttl = kwargs.get("ttl") or {}
        if ttl.get("sweep_interval_minutes"):
            await memory.start_ttl_sweeper()
        logger.info(
            "rediskv store: %s%s, prefix %r, ttl %s, index %s",
            redact_url(url),
            " (cluster)" if kwargs.get("cluster") else "",
            kwargs["prefix"],
            ttl or "none",
            "none" if "index" not in kwargs else f"{kwargs['index']['dims']} dims",
        )
        yield memory
    finally:
        await memory.aclose()
