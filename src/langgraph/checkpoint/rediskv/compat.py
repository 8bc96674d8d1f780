"""The constructor's arguments as users of other savers write them, checked at construction.

A user of langgraph-checkpoint-redis writes ``RedisSaver(redis_url=..., redis_client=...,
connection_args={...})``; a user of PostgresSaver hands the client in positionally. Both
work here. Any other keyword goes to redis-py's connection pool, which would accept an
unknown one silently and fail at the first call (or, for ``redis_url=``, connect to
``$REDIS_URL`` instead): so every keyword is checked against what redis-py takes, now.
"""

from __future__ import annotations

import difflib
import inspect
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from .settings import resolve_url

# The official saver's names for this saver's arguments.
ALIASES = {"redis_url": "url", "redis_client": "client", "checkpoint_prefix": "prefix"}

# The official saver's arguments that have no counterpart here, and why.
NO_COUNTERPART = {
    "checkpoint_write_prefix": "pending writes are stored under `prefix` with the checkpoints",
    "key_cache_max_size": "the saver's caches are bounded per process (see the README)",
    "channel_cache_max_size": "the saver's caches are bounded per process (see the README)",
}


@dataclass(frozen=True, slots=True)
class Arguments:
    """The connection arguments once the official names are resolved."""

    url: str | None
    client: Any
    prefix: str | None  # from checkpoint_prefix; None: the `prefix` argument stands
    redis_kwargs: dict[str, Any]


def resolve_arguments(
    saver: str,
    url: Any,
    client: Any,
    redis_kwargs: dict[str, Any],
    *,
    is_client: Callable[[Any], bool],
    client_kind: str,
    cluster: bool,
    own_names: Iterable[str],
    asyncio: bool = False,
) -> Arguments:
    """Resolve the official saver's names (``redis_url``, ``redis_client``,
    ``connection_args``, ``checkpoint_prefix``) and a client given positionally, and check
    every other keyword against the options redis-py takes for the connection the saver
    opens. ``saver`` names the class in messages; ``is_client`` tells a client this saver
    can use, ``client_kind`` names it."""
    kwargs = dict(redis_kwargs)
    given: dict[str, Any] = {"url": url, "client": client}
    prefix: str | None = None
    for official, ours in ALIASES.items():
        if official not in kwargs:
            continue
        value = kwargs.pop(official)
        if ours == "prefix":
            prefix = value
            continue
        if given[ours] is not None:
            raise TypeError(f"{saver}() got both {ours}= and {official}= (the same argument)")
        given[ours] = value
    for name, why in NO_COUNTERPART.items():
        if name in kwargs:
            raise TypeError(f"{saver}() takes no {name}= argument: {why}; leave it out")
    connection_args = kwargs.pop("connection_args", None)
    if connection_args is not None:
        if not isinstance(connection_args, Mapping):
            raise TypeError(
                f"{saver}(): connection_args must be a dict of redis-py connection options, "
                f"not {type(connection_args).__name__}"
            )
        twice = sorted(set(connection_args) & set(kwargs))
        if twice:
            raise TypeError(
                f"{saver}() got {', '.join(twice)} both as keywords and in connection_args"
            )
        kwargs.update(connection_args)
    url, client = given["url"], given["client"]
    if url is not None and not isinstance(url, str):
        if client is None and is_client(url):  # RedisSaver(redis.Redis()), as PostgresSaver(conn)
            url, client = None, url
        else:
            raise TypeError(
                f"{saver}() takes a URL (a str) or {client_kind} as its first argument, "
                f"not {type(url).__module__}.{type(url).__qualname__}"
            )
    if client is not None and not is_client(client):
        raise TypeError(
            f"{saver}() needs {client_kind} as its client, not "
            f"{type(client).__module__}.{type(client).__qualname__}"
        )
    if client is not None and kwargs:
        raise TypeError(
            f"{saver}(): the connection options {', '.join(sorted(kwargs))} apply to a "
            "connection the saver opens; with a client given, set them on that client"
        )
    if kwargs:
        _check_options(saver, kwargs, url, cluster, own_names, asyncio)
    return Arguments(url, client, prefix, kwargs)


def _check_options(
    saver: str,
    kwargs: Mapping[str, Any],
    url: str | None,
    cluster: bool,
    own: Iterable[str],
    asyncio: bool,
) -> None:
    allowed = connection_options(url if cluster else resolve_url(url), cluster, asyncio)
    if isinstance(kwargs.get("connection_class"), type):  # (a class of the caller's)
        for base in kwargs["connection_class"].__mro__:
            if "__init__" in vars(base):
                allowed |= _parameters(base.__init__)
    unknown = sorted(set(kwargs) - allowed)
    if not unknown:
        return
    name = unknown[0]
    known = sorted({*allowed, *own, *ALIASES, "connection_args"})
    close = difflib.get_close_matches(name, known, n=1)
    hint = f"; did you mean {close[0]}=?" if close else ""
    if not cluster and name in connection_options("rediss://", False, asyncio):
        hint = "; it applies to TLS connections: use a rediss:// URL"
    raise TypeError(
        f"{saver}() got an unexpected keyword argument {name!r}{hint} (any keyword beyond the "
        "saver's own arguments must be an option of redis-py's connection)"
    )


def connection_options(url: str | None, cluster: bool, asyncio: bool = False) -> set[str]:
    """The keywords redis-py takes for the pool (or cluster client) the saver opens on
    ``url``: those of its constructor and of the connection class the URL's scheme picks."""
    import redis.asyncio.connection
    import redis.connection
    from redis.asyncio.cluster import RedisCluster as AsyncCluster
    from redis.cluster import REDIS_ALLOWED_KEYS, RedisCluster

    if cluster:
        if asyncio:
            return _parameters(AsyncCluster.__init__)
        return _parameters(RedisCluster.__init__) | set(REDIS_ALLOWED_KEYS)
    module: Any = redis.asyncio.connection if asyncio else redis.connection
    scheme = urlsplit(url or "").scheme
    kind = {"rediss": "SSLConnection", "unix": "UnixDomainSocketConnection"}.get(scheme)
    names = _parameters(module.BlockingConnectionPool.__init__)
    names |= _parameters(module.ConnectionPool.__init__)
    names |= _parameters(module.AbstractConnection.__init__)
    return names | _parameters(getattr(module, kind or "Connection").__init__)


def _parameters(function: Callable[..., Any]) -> set[str]:
    kinds = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    parameters = inspect.signature(function).parameters.values()
    return {p.name for p in parameters if p.kind in kinds} - {"self"}
