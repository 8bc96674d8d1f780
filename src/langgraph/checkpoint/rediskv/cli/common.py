"""What every command shares: the saver it connects with, user errors, configs."""

from __future__ import annotations

import argparse
import re
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, TypeVar

from ..base import UNAVAILABLE
from ..errors import CliError as CliError  # (re-exported)
from ..keys import THREADS_BY_VALUE, KeySchema
from ..options import SaverSettings
from ..settings import redact_url
from ..sync import RedisSaver

if TYPE_CHECKING:
    from langchain_core.runnables import RunnableConfig

T = TypeVar("T")

PIPELINE_SIZE = 500  # commands per pipeline


@contextmanager
def open_saver(
    args: argparse.Namespace, *, ttl: Any = None, index_metadata: Iterable[str] = ()
) -> Iterator[RedisSaver]:
    """A saver on ``--url`` / ``--prefix``, its connection checked first; closed afterwards.

    It indexes no metadata key of its own unless asked (``reindex --index``): a tool run must
    not register keys in the prefix's registry as a side effect."""
    settings = SaverSettings.from_kwargs(  # a bad prefix or URL fails before we connect
        args.url, prefix=args.prefix, ttl=ttl, retries=1, index_metadata=tuple(index_metadata)
    )
    url = settings.url or ""
    schema = KeySchema(settings.prefix)
    saver = RedisSaver.from_settings(settings)
    try:
        try:
            # not PING: a least-privilege user may only have the saver's commands (EXISTS is
            # one) on the prefix's keys (the registry is one)
            saver.client.exists(schema.metadata_keys())
        except UNAVAILABLE as exc:
            raise CliError(f"cannot reach Redis at {redact_url(url)}: {exc}") from None
        try:
            yield saver
        except UNAVAILABLE as exc:  # raw client calls (SCAN, EXISTS ...) failing midway
            raise CliError(f"lost the connection to Redis at {redact_url(url)}: {exc}") from None
    finally:
        saver.close()


def chunks(items: Sequence[T], size: int = PIPELINE_SIZE) -> Iterator[Sequence[T]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


def dedupe(items: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(items))


def thread_config(
    thread_id: str, ns: str | None = None, checkpoint_id: str | None = None
) -> RunnableConfig:
    configurable: dict[str, Any] = {"thread_id": thread_id}
    if ns is not None:
        configurable["checkpoint_ns"] = ns
    if checkpoint_id is not None:
        configurable["checkpoint_id"] = checkpoint_id
    return {"configurable": configurable}


def no_checkpoints(saver: RedisSaver, thread_id: str, ns: str | None = None) -> CliError:
    where = "" if ns is None else f" in namespace {ns!r}"
    return CliError(f"thread {thread_id!r} has no checkpoints{where} under prefix {saver.prefix!r}")


_PIPELINE_NOTE = re.compile(r"^Command # \d+ \(.*\) of pipeline caused error: ")


def refused(command: str, exc: Exception) -> str:
    """Why a command the user may lack did not run: ``INFO is not allowed (...)``."""
    import redis

    first = next((line.strip() for line in str(exc).splitlines() if line.strip()), "")
    first = _PIPELINE_NOTE.sub("", first)  # which command of a pipeline: noise here
    if isinstance(exc, redis.exceptions.NoPermissionError):
        return f"{command} is not allowed ({first})"
    return f"{command} failed ({first or type(exc).__name__})"


def index_states(registry: dict[Any, Any]) -> dict[str, str]:
    """The registry P:mk (HGETALL) as index name -> state, in name order; the
    threads-by-value indexes are "(threads by value)". (It holds the metadata keys raw.)"""
    states = {}
    for raw, state in registry.items():
        key = raw.decode(errors="replace") if isinstance(raw, bytes) else str(raw)
        name = "(threads by value)" if key == THREADS_BY_VALUE else key
        text = state.decode() if isinstance(state, bytes) else str(state)
        # "building:<token>": claimed by a reindex that runs, or stopped
        states[name] = "building" if text.startswith("building") else text
    return dict(sorted(states.items()))
