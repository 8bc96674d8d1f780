"""A saver's options as one validated value: :class:`SaverSettings`.

Every option of the savers' constructors (but the client, the serializer and redis-py's own
connection options) is checked once, here, with an error that names the option; the
constructors, the ``rediskv`` command and the Agent Server's factory (``server.py``) all
build one of these and read it, none checks an option again.

Where an option comes from, first found wins: a keyword argument, then the environment (only
for :meth:`SaverSettings.from_env`, and ``$REDIS_URL`` for the URL always), then the default.
The environment variables are those the package already reads (``server.py`` lists them).
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from .compression import compression_level
from .core.limits import Limits
from .core.rules import DEFAULT_INDEXED_METADATA
from .errors import SettingsError
from .keys import validate_prefix
from .settings import (
    DEFAULT_URL,
    TTLSettings,
    parse_keep_last,
    parse_on_lost_checkpoint,
    parse_ttl,
    redact_url,
    resolve_url,
)

# Connection pool defaults: bounded and blocking, so a burst of concurrent graphs waits for a
# free connection (up to POOL_TIMEOUT seconds) instead of failing with "Too many connections".
MAX_CONNECTIONS = 64
POOL_TIMEOUT = 30.0
CONNECT_TIMEOUT = 5.0
# A server that stops answering fails a call after SOCKET_TIMEOUT seconds instead of hanging.
SOCKET_TIMEOUT = 30.0
# On a cluster, how long a call waits while its thread's slot is moved between nodes.
SLOT_MOVE_WAIT = 30.0
# A dropped connection or a timeout is retried this many times, with jittered exponential
# backoff (redis-py's Retry). Every script is idempotent, so a retried call that had already
# run before its reply was lost does no harm.
RETRIES = 3


@dataclass(frozen=True, slots=True)
class SaverSettings:
    """The options of a saver, validated (build it with :meth:`from_kwargs` or
    :meth:`from_env`; the fields hold the checked forms: ``ttl`` as TTLSettings,
    ``compression`` as a zstd level or None, ``keep_last`` 0 for no limit).

    ``url`` is None when the saver is given a client (it then connects nowhere itself)."""

    url: str | None = field(default=None, repr=False)  # (it may hold a password)
    cluster: bool = False
    prefix: str = "lg"
    ttl: TTLSettings | None = None
    compression: int | None = None
    keep_last: int = 0
    on_lost_checkpoint: str = "raise"
    index_metadata: tuple[str, ...] = DEFAULT_INDEXED_METADATA
    functions: bool = True
    # WAIT for this many replicas (0: no WAIT) up to wait_timeout_ms after each write
    wait_for_replicas: int = 0
    wait_timeout_ms: int = 100
    max_connections: int = MAX_CONNECTIONS
    pool_timeout: float = POOL_TIMEOUT
    connect_timeout: float = CONNECT_TIMEOUT
    socket_timeout: float | None = SOCKET_TIMEOUT
    retries: int = RETRIES
    slot_move_wait: float = SLOT_MOVE_WAIT
    auto_pipeline: bool = True
    # the tuning limits (no option of the constructors: tests pass smaller ones here)
    limits: Limits = field(default_factory=Limits)

    @classmethod
    def from_kwargs(
        cls,
        url: str | None = None,
        *,
        client_given: bool = False,
        cluster: bool = False,
        prefix: str = "lg",
        ttl: Any = None,
        compression: Any = True,
        keep_last: Any = None,
        on_lost_checkpoint: Any = "raise",
        index_metadata: Iterable[str] = DEFAULT_INDEXED_METADATA,
        functions: bool = True,
        wait_for_replicas: Any = 0,
        wait_timeout: Any = 0.1,
        max_connections: int = MAX_CONNECTIONS,
        pool_timeout: float = POOL_TIMEOUT,
        connect_timeout: float = CONNECT_TIMEOUT,
        socket_timeout: float | None = SOCKET_TIMEOUT,
        retries: int = RETRIES,
        slot_move_wait: float = SLOT_MOVE_WAIT,
        auto_pipeline: bool = True,
        limits: Limits | None = None,
    ) -> SaverSettings:
        """The settings from the constructors' keyword arguments (their names and
        defaults), each checked; raises ValueError naming the first bad one. ``url``:
        else ``$REDIS_URL``, else the local default, unless ``client_given``."""
        replicas, timeout_ms = parse_wait(wait_for_replicas, wait_timeout, socket_timeout)
        if isinstance(index_metadata, str) or not all(isinstance(k, str) for k in index_metadata):
            raise ValueError(
                f"index_metadata must be a list of metadata keys, not {index_metadata!r}"
            )
        # (checked in this order: the first bad one is the one named)
        prefix = validate_prefix(prefix)
        ttl_settings = parse_ttl(ttl)
        level = compression_level(compression)
        keep = parse_keep_last(keep_last)
        on_lost = parse_on_lost_checkpoint(on_lost_checkpoint)
        return cls(
            url=None if client_given else resolve_url(url),
            cluster=cluster,
            prefix=prefix,
            ttl=ttl_settings,
            compression=level,
            keep_last=keep,
            on_lost_checkpoint=on_lost,
            index_metadata=tuple(dict.fromkeys(index_metadata)),
            functions=functions,
            wait_for_replicas=replicas,
            wait_timeout_ms=timeout_ms,
            max_connections=max_connections,
            pool_timeout=pool_timeout,
            connect_timeout=connect_timeout,
            socket_timeout=socket_timeout,
            retries=retries,
            slot_move_wait=slot_move_wait,
            auto_pipeline=auto_pipeline,
            limits=Limits() if limits is None else limits,
        )

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, **kwargs: Any) -> SaverSettings:
        """The settings from the environment (the variables of ``server.py``), a keyword
        argument given here overriding its variable; raises SettingsError naming a bad
        variable, ValueError naming a bad argument."""
        from_env = env_kwargs(os.environ if environ is None else environ, "ttl" in kwargs)
        from_env.pop("url_from_env")
        ttl_minutes = from_env.pop("ttl_minutes")
        refresh = from_env.pop("refresh_on_read")
        from_env["ttl"] = (
            None
            if ttl_minutes is None
            else {"default_ttl": ttl_minutes, "refresh_on_read": refresh}
        )
        return cls.from_kwargs(**{**from_env, **kwargs})


def parse_wait(replicas: Any, timeout: Any, socket_timeout: float | None) -> tuple[int, int]:
    """``wait_for_replicas`` and ``wait_timeout`` (seconds) as replicas and milliseconds.
    Raises ValueError naming a bad value."""
    if isinstance(replicas, bool) or not isinstance(replicas, int) or replicas < 0:
        raise ValueError(
            f"wait_for_replicas must be a number of replicas (an int, 0 for none), not {replicas!r}"
        )
    if (
        isinstance(timeout, bool)
        or not isinstance(timeout, int | float)
        or not math.isfinite(timeout)
        or timeout <= 0
    ):
        raise ValueError(
            f"wait_timeout must be a number of seconds greater than 0, not {timeout!r} "
            "(WAIT with a timeout of 0 would block until the replicas answer, forever)"
        )
    if socket_timeout is not None and timeout >= socket_timeout:
        raise ValueError(
            f"wait_timeout ({timeout} s) must be shorter than socket_timeout "
            f"({socket_timeout} s): the connection would time out before WAIT replies"
        )
    return replicas, max(1, round(timeout * 1000))


# -- the environment ----------------------------------------------------------------------
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
# the long-term memory store's (langgraph.store.rediskv.server): known here too, so that
# the checkpointer does not take it for a typo of its own
STORE_PREFIX_VAR = "REDISKV_STORE_PREFIX"
_OWN_NAMESPACE = "REDISKV_"
# the package's own variables, in the order an unknown one's error lists them
_OWN_VARS = tuple(v for v in (*ENV_VARS, STORE_PREFIX_VAR) if v.startswith(_OWN_NAMESPACE))
_TRUE = frozenset({"1", "true", "yes", "on"})
_FALSE = frozenset({"0", "false", "no", "off"})


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


def env_kwargs(env: Mapping[str, str], ttl_given: bool = False) -> dict[str, Any]:
    """The options the environment sets, as keyword arguments (``ttl`` as ``ttl_minutes``
    and ``refresh_on_read``, and ``url_from_env``: whether ``$REDIS_URL`` gave the URL);
    raises :class:`SettingsError` on the first bad variable. ``ttl_given``: an argument
    sets the ttl, so the ttl variables need not agree with each other."""
    unknown = sorted(
        name for name in env if name.startswith(_OWN_NAMESPACE) and name not in _OWN_VARS
    )
    if unknown:
        known = ", ".join(_OWN_VARS)
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
    if refresh and ttl_minutes is None and not ttl_given:
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
    return {
        "url": url,
        "url_from_env": raw_url is not None,
        "prefix": prefix,
        "ttl_minutes": ttl_minutes,
        "refresh_on_read": refresh,
        "cluster": cluster,
        "compression": _parse_compression(env),
        "keep_last": _parse_positive_int(
            env,
            KEEP_LAST_VAR,
            "use the number of newest checkpoints to keep per thread (1 or more), "
            "or leave it unset to keep all",
        ),
        "index_metadata": index_metadata,
    }
