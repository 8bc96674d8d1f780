"""Opening a source from a URL: the schemes, the presets they name, and a saver made by a
factory (``python:package.module:factory``)."""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

from langgraph.checkpoint.base import BaseCheckpointSaver

from ..settings import redact_url
from .source import Source
from .sources_redis import LangGraphRedisSource, PlainRedisSource, ValkeySource
from .sources_sql import PostgresSource, SqliteSource

T = TypeVar("T")

# scheme -> what it opens, for the CLI's help and errors
SOURCE_SCHEMES = {
    "postgresql://, postgres://": "langgraph-checkpoint-postgres (PostgresSaver)",
    "sqlite:///relative.db, sqlite:////absolute.db": "langgraph-checkpoint-sqlite (SqliteSaver)",
    "langgraph-redis+redis[s]://HOST:PORT/DB": (
        "langgraph-checkpoint-redis (RedisSaver, needs Redis 8 or Redis Stack); "
        "?checkpoint_prefix=&checkpoint_write_prefix= if not the defaults"
    ),
    "plainredis+redis[s]://HOST:PORT/DB": (
        "langgraph-checkpoint-plainredis (RedisSaver); ?prefix=lg if not the default"
    ),
    "aws-valkey+redis[s]://HOST:PORT/DB (or +valkey[s]://)": (
        "langgraph-checkpoint-aws (ValkeySaver)"
    ),
    "python:package.module:factory": (
        "any other saver: factory() returns a BaseCheckpointSaver or a context manager yielding one"
    ),
}


def made_by_factory(spec: str, stack: contextlib.ExitStack) -> Any:
    """What ``python:package.module:factory`` makes: ``factory()``, entered when it is a
    context manager (closed with ``stack``); modules of the working directory are found, as
    ``python -m`` finds them."""
    import importlib

    module_name, _, attr = spec.partition(":")
    if not module_name or not attr:
        raise ValueError(f"invalid source {spec!r}: use python:package.module:factory")
    if "" not in sys.path and os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    made = getattr(importlib.import_module(module_name), attr)()
    if isinstance(made, contextlib.AbstractContextManager):
        made = stack.enter_context(made)
    return made


class _FactorySource(Source):
    def __init__(self, spec: str, stack: contextlib.ExitStack) -> None:
        made = made_by_factory(spec, stack)
        if not isinstance(made, BaseCheckpointSaver):
            raise ValueError(f"python:{spec} gave {type(made).__name__}, not a checkpoint saver")
        super().__init__(made, name=spec)


_PRESETS: dict[str, Callable[[str, contextlib.ExitStack], Source]] = {
    "postgresql": PostgresSource,
    "postgres": PostgresSource,
    "langgraph-redis": LangGraphRedisSource,
    "plainredis": PlainRedisSource,
    "aws-valkey": ValkeySource,
}


# The packages each kind of source is read with (not dependencies of this package).
_SOURCE_PACKAGES = {
    "postgresql": "langgraph-checkpoint-postgres 'psycopg[binary]'",
    "postgres": "langgraph-checkpoint-postgres 'psycopg[binary]'",
    "sqlite": "langgraph-checkpoint-sqlite",
    "langgraph-redis": "langgraph-checkpoint-redis",
    "plainredis": "langgraph-checkpoint-plainredis",
    "aws-valkey": "'langgraph-checkpoint-aws[valkey]'",
}


@contextlib.contextmanager
def open_source(url: str) -> Iterator[Source]:
    """The source a URL names (:data:`SOURCE_SCHEMES`), closed afterwards."""
    with opened_by_url(url, _make_source, _SOURCE_PACKAGES, "source") as source:
        yield source


@contextlib.contextmanager
def opened_by_url(
    url: str,
    make: Callable[[str, contextlib.ExitStack], T],
    packages: dict[str, str],
    what: str,
) -> Iterator[T]:
    """``make(url, stack)``, closed afterwards; a package missing for the URL's kind (the
    part of its scheme before ``+``) is a ValueError that says what to install."""
    with contextlib.ExitStack() as stack:
        try:
            made = make(url, stack)
        except ModuleNotFoundError as exc:
            kind = url.partition(":")[0].partition("+")[0]
            if kind not in packages:
                raise
            raise ValueError(
                f"reading a {kind} {what} needs the package that wrote it ({exc.name} is not "
                f"installed): pip install {packages[kind]}"
            ) from exc
        yield made


def _make_source(url: str, stack: contextlib.ExitStack) -> Source:
    scheme, sep, rest = url.partition(":")
    kind, plus, inner_scheme = scheme.partition("+")
    if scheme in ("postgresql", "postgres"):
        return PostgresSource(url, stack)
    if scheme == "sqlite":
        return SqliteSource(url, stack)
    if scheme == "python" and sep:
        return _FactorySource(rest, stack)
    if plus and kind in _PRESETS and inner_scheme:
        return _PRESETS[kind](f"{inner_scheme}:{rest}", stack)
    known = ", ".join(SOURCE_SCHEMES)
    raise ValueError(f"unknown source {redact_url(url)!r}: use one of {known}")
