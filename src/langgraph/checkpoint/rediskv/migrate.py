"""Copy threads from another checkpointer into this one, and check the copy.

::

    from langgraph.checkpoint.rediskv import RedisSaver
    from langgraph.checkpoint.rediskv.migrate import migrate, open_source

    with open_source("postgresql://user@host/db") as source, RedisSaver(url) as target:
        report = migrate(source, target)
    assert report.ok, report.problems()

What is copied, per thread and per namespace (the root ``""`` and every subgraph's): every
checkpoint, oldest first, with ``put(config_with_parent, checkpoint, metadata, versions)``
(``versions`` names every channel that has a value, so every value is stored, whatever the
source's ``new_versions`` were), then its pending writes with ``put_writes(config, writes,
task_id, task_path)``, one call per task. Checkpoint ids are kept.

Delta channels: a checkpoint that stores no value of a ``DeltaChannel`` is rebuilt from its
ancestors (``get_delta_channel_history``), which the source need not list: a rediskv saver with
``keep_last`` keeps them hidden. So the ancestors a listed checkpoint's delta channels (those
of its metadata ``counters_since_delta_snapshot``) are rebuilt from, back to the ones storing
a value of every such channel, are read (:meth:`Source.ancestor`) and copied too; the target,
which keeps every checkpoint, lists them. After the copy, each chain of checkpoints (its oldest
one, whose parent was not copied) and the latest of each namespace are rebuilt on both sides:
``get_delta_channel_history`` must give the same seed and writes. A thread whose history could
not be carried (an ancestor the source no longer gives) is "incomplete", with a problem naming
the checkpoint and channel.

Resuming: a thread whose checkpoint ids are all in the target already is skipped ("present");
one the target holds part of (an interrupted run) is copied again: a put of an id the target
has replaces it, and a pending write already stored is kept (the first write of a task and
slot wins), so nothing is duplicated. A thread whose copy in the target has checkpoints the
source lacks (the application went on writing there) is a "conflict": it is left alone.

Verification (on by default) reads both sides back: ``list`` of each namespace must give the
same checkpoint ids in the same order, and for each checkpoint ``get_tuple`` of the target
(and the listed tuples of both sides) must give the same checkpoint (values, versions,
versions seen), metadata, parent and pending writes; ``get_tuple`` without an id (the latest)
must agree too. Metadata is compared as this saver stores it (a legacy ``writes`` key dropped).

Sources: :func:`open_source` opens one from a URL (see :data:`SOURCE_SCHEMES`); any other
saver with the synchronous API is used through :class:`Source`, which finds the threads with
``list(None)``. The task path of a pending write is not part of ``CheckpointTuple``: the
Postgres, SQLite, langgraph-checkpoint-redis, in-memory and rediskv sources read it from their
storage (the order a superstep's writes are replayed in, a DeltaChannel's among them); the
others do not store it (it is copied as ``""``).
"""

from __future__ import annotations

import contextlib
import itertools
import os
import sqlite3
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, cast
from urllib.parse import parse_qsl, unquote, urlsplit, urlunsplit

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    WRITES_IDX_MAP,
    BaseCheckpointSaver,
    Checkpoint,
    CheckpointTuple,
    get_serializable_checkpoint_metadata,
)

from .settings import redact_url
from .sync import RedisSaver

__all__ = [
    "SOURCE_SCHEMES",
    "MigrationReport",
    "Source",
    "ThreadReport",
    "delta_differences",
    "migrate",
    "open_source",
    "verify_thread",
]

Status = Literal["copied", "present", "conflict", "to copy", "failed", "incomplete"]

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

WriteKey = tuple[str, str, str]  # (namespace, checkpoint id, task id)


def _config(thread_id: str, ns: str, checkpoint_id: str | None = None) -> RunnableConfig:
    configurable: dict[str, Any] = {"thread_id": thread_id, "checkpoint_ns": ns}
    if checkpoint_id is not None:
        configurable["checkpoint_id"] = checkpoint_id
    return {"configurable": configurable}


def _ns_of(item: CheckpointTuple) -> str:
    return str(item.config["configurable"].get("checkpoint_ns") or "")


def _id_of(item: CheckpointTuple) -> str:
    return str(item.config["configurable"]["checkpoint_id"])


def _parent_id(item: CheckpointTuple) -> str | None:
    parent = (item.parent_config or {}).get("configurable", {}).get("checkpoint_id")
    return str(parent) if parent else None


def _delta_channels(item: CheckpointTuple) -> list[str]:
    """The DeltaChannels of a checkpoint: LangGraph counts their updates since their last
    snapshot in its metadata (absent when the graph has none)."""
    counters = (item.metadata or {}).get("counters_since_delta_snapshot") or {}
    return sorted(str(channel) for channel in counters)


def _kept_checkpoint(
    saver: RedisSaver, thread_id: str, ns: str, checkpoint_id: str
) -> CheckpointTuple | None:
    """A checkpoint of a rediskv saver by id, also one keep_last hides because newer ones
    rebuild their delta channels from it (lua/get_kept_checkpoint.lua)."""
    from .core import ScriptCall
    from .keys import encode_part

    core = saver._core
    tag = core.keys.tag(thread_id)

    def read() -> Any:
        record = yield ScriptCall(
            "get_kept_checkpoint",
            (core.keys.index(tag, ns),),
            (core.keys.prefix, tag, encode_part(ns), checkpoint_id),
        )
        return core.codec.decode_record(thread_id, record) if record else None

    return cast(CheckpointTuple | None, saver._run(read()))


# checkpoint ids per get_write_paths call
WRITE_PATHS_BATCH = 500


def _rediskv_task_paths(saver: RedisSaver, thread_id: str, ns: str) -> dict[WriteKey, str]:
    """The task paths of the pending writes of every checkpoint of a namespace of a rediskv
    saver, hidden ones too (lua/get_write_paths.lua)."""
    from .core import ScriptCall
    from .keys import decode_part, encode_part

    core = saver._core
    tag = core.keys.tag(thread_id)
    index = core.keys.index(tag, ns)
    ids = [
        i.decode() if isinstance(i, bytes) else str(i) for i in saver.client.zrange(index, 0, -1)
    ]
    found: dict[WriteKey, str] = {}
    for start in range(0, len(ids), WRITE_PATHS_BATCH):
        chunk = ids[start : start + WRITE_PATHS_BATCH]

        def read(chunk: list[str] = chunk) -> Any:
            args = (core.keys.prefix, tag, encode_part(ns), *chunk)
            return (yield ScriptCall("get_write_paths", (index,), args))

        for cid, pairs in zip(chunk, saver._run(read()), strict=True):
            for task, path in zip(pairs[::2], pairs[1::2], strict=True):
                found[(ns, cid, decode_part(task.decode()))] = path.decode()
    return found


class Source:
    """A saver to copy from, and how to find its threads.

    This generic form works with any saver whose ``list(None)`` lists every checkpoint (the
    in-memory, Postgres, SQLite and plainredis savers do); the presets of
    :func:`open_source` override what their saver does not offer (or offers slowly)."""

    def __init__(self, saver: BaseCheckpointSaver[Any], *, name: str | None = None) -> None:
        self.saver = saver
        self.name = name or type(saver).__name__
        if type(saver).__name__ == "InMemorySaver" or isinstance(saver, RedisSaver):
            self.has_task_paths = True

    def thread_ids(self) -> list[str]:
        """Every thread id of the source, sorted."""
        return sorted({str(t.config["configurable"]["thread_id"]) for t in self.saver.list(None)})

    def namespaces(self, thread_id: str) -> list[str]:
        """The checkpoint namespaces of a thread ("" first)."""
        found = {_ns_of(t) for t in self.saver.list({"configurable": {"thread_id": thread_id}})}
        return sorted(found)

    def checkpoints(self, thread_id: str, ns: str) -> list[CheckpointTuple]:
        """Every checkpoint of one namespace of a thread, oldest first."""
        listed = self.saver.list(_config(thread_id, ns))
        return sorted((t for t in listed if _ns_of(t) == ns), key=_id_of)

    def latest(self, thread_id: str, ns: str) -> CheckpointTuple | None:
        return self.saver.get_tuple(_config(thread_id, ns))

    def ancestor(self, thread_id: str, ns: str, checkpoint_id: str) -> CheckpointTuple | None:
        """A checkpoint by id, also one the source keeps without listing it (a rediskv saver
        with keep_last keeps the ancestors of delta channels hidden); None if it has none."""
        if isinstance(self.saver, RedisSaver):
            return _kept_checkpoint(self.saver, thread_id, ns, checkpoint_id)
        found = self.saver.get_tuple(_config(thread_id, ns, checkpoint_id))
        return found if found is not None and _id_of(found) == checkpoint_id else None

    def delta_ancestors(
        self, thread_id: str, ns: str, listed: Sequence[CheckpointTuple]
    ) -> list[CheckpointTuple]:
        """The checkpoints the listed ones rebuild their delta channels from that are not
        listed themselves, oldest first: the parent chain of each listed checkpoint whose
        parent is not listed, up to the ancestors that store a value of each such channel
        (or as far as the source gives them). Nothing for a source that lists them all."""
        ids = {_id_of(t) for t in listed}
        found: dict[str, CheckpointTuple] = {}
        for item in listed:
            values = item.checkpoint.get("channel_values") or {}
            channels = set(_delta_channels(item)) - set(values)
            parent = _parent_id(item)
            while channels and parent is not None and parent not in ids:
                ancestor = found.get(parent) or self.ancestor(thread_id, ns, parent)
                if ancestor is None:  # gone: the check after the copy says what is lost
                    break
                found[parent] = ancestor
                channels -= set(ancestor.checkpoint.get("channel_values") or {})
                parent = _parent_id(ancestor)
        return sorted(found.values(), key=_id_of)

    def checkpoints_to_copy(self, thread_id: str, ns: str) -> list[CheckpointTuple]:
        """The listed checkpoints and their :meth:`delta_ancestors`, oldest first."""
        listed = self.checkpoints(thread_id, ns)
        return sorted([*listed, *self.delta_ancestors(thread_id, ns, listed)], key=_id_of)

    # whether task_paths() knows them: if not, pending writes are compared regardless of
    # their order (the target orders them by task path, then task id)
    has_task_paths = False

    def task_paths(self, thread_id: str) -> dict[WriteKey, str]:
        """The task path of each (namespace, checkpoint id, task id) with pending writes,
        where the source stores it; missing ones are copied as ``""``."""
        from langgraph.checkpoint.memory import InMemorySaver

        if isinstance(self.saver, RedisSaver):
            return {
                key: path
                for ns in self.namespaces(thread_id)
                for key, path in _rediskv_task_paths(self.saver, thread_id, ns).items()
            }
        if not isinstance(self.saver, InMemorySaver):
            return {}
        return {
            (ns, cid, task_id): path
            for (tid, ns, cid), writes in self.saver.writes.items()
            if tid == thread_id
            for task_id, _channel, _value, path in writes.values()
        }

    def close(self) -> None:
        """Release what :func:`open_source` opened (nothing for a saver given directly)."""


# -- presets -------------------------------------------------------------------------------


class _PostgresSource(Source):
    has_task_paths = True

    def __init__(self, url: str, stack: contextlib.ExitStack) -> None:
        import psycopg
        from langgraph.checkpoint.postgres import PostgresSaver

        super().__init__(stack.enter_context(PostgresSaver.from_conn_string(url)), name="postgres")
        self.conn = stack.enter_context(psycopg.connect(url, autocommit=True))

    def _rows(self, sql: str, *args: Any) -> list[tuple[Any, ...]]:
        with self.conn.cursor() as cur:
            cur.execute(sql, args)
            return list(cur.fetchall())

    def thread_ids(self) -> list[str]:
        return [r[0] for r in self._rows("SELECT DISTINCT thread_id FROM checkpoints ORDER BY 1")]

    def namespaces(self, thread_id: str) -> list[str]:
        sql = "SELECT DISTINCT checkpoint_ns FROM checkpoints WHERE thread_id = %s ORDER BY 1"
        return [r[0] for r in self._rows(sql, thread_id)]

    def task_paths(self, thread_id: str) -> dict[WriteKey, str]:
        sql = (
            "SELECT DISTINCT checkpoint_ns, checkpoint_id, task_id, task_path "
            "FROM checkpoint_writes WHERE thread_id = %s"
        )
        return {(r[0], r[1], r[2]): r[3] for r in self._rows(sql, thread_id)}


def _sqlite_path(url: str) -> str:
    # SQLAlchemy's convention: sqlite:///relative/path, sqlite:////absolute/path
    rest = url[len("sqlite:") :]
    if not rest.startswith("///") or len(rest) == 3:
        raise ValueError(
            f"invalid SQLite URL {url!r}: use sqlite:///relative.db or sqlite:////absolute.db"
        )
    return unquote(rest[3:].split("?", 1)[0])


class _SqliteSource(Source):
    has_task_paths = True

    def __init__(self, url: str, stack: contextlib.ExitStack) -> None:
        from langgraph.checkpoint.sqlite import SqliteSaver

        path = _sqlite_path(url)
        # read-only: a typo in the path fails instead of creating an empty database
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, check_same_thread=False)
        stack.callback(conn.close)
        saver = SqliteSaver(conn)
        saver.is_setup = True  # setup() would create tables: the source is only read
        super().__init__(saver, name="sqlite")
        self.conn = conn

    def thread_ids(self) -> list[str]:
        rows = self.conn.execute("SELECT DISTINCT thread_id FROM checkpoints ORDER BY 1")
        return [str(r[0]) for r in rows]

    def namespaces(self, thread_id: str) -> list[str]:
        rows = self.conn.execute(
            "SELECT DISTINCT checkpoint_ns FROM checkpoints WHERE thread_id = ? ORDER BY 1",
            (thread_id,),
        )
        return [str(r[0]) for r in rows]

    def task_paths(self, thread_id: str) -> dict[WriteKey, str]:
        columns = {r[1] for r in self.conn.execute("PRAGMA table_info(writes)")}
        if "task_path" not in columns:  # a database written before task_path existed
            return {}
        rows = self.conn.execute(
            "SELECT DISTINCT checkpoint_ns, checkpoint_id, task_id, task_path FROM writes "
            "WHERE thread_id = ?",
            (thread_id,),
        )
        return {(str(r[0]), str(r[1]), str(r[2])): str(r[3]) for r in rows}


def _split_query(url: str) -> tuple[str, dict[str, str]]:
    parts = urlsplit(url)
    return urlunsplit(parts._replace(query="")), dict(parse_qsl(parts.query))


class _LangGraphRedisSource(Source):
    """langgraph-checkpoint-redis: threads found with FT.AGGREGATE on its checkpoint index.

    Limit: its ``list`` returns at most MAXSEARCHRESULTS checkpoints per call (10,000 by
    default), so a namespace with more checkpoints than that is not copied whole (the
    verification then fails for it)."""

    has_task_paths = True

    def __init__(self, url: str, stack: contextlib.ExitStack) -> None:
        from langgraph.checkpoint.redis import RedisSaver as OfficialSaver

        inner, options = _split_query(url)
        prefixes: dict[str, Any] = {
            k: options.pop(k)
            for k in ("checkpoint_prefix", "checkpoint_write_prefix")
            if k in options
        }
        if options:
            raise ValueError(f"unknown option(s) in the source URL: {sorted(options)}")
        saver = stack.enter_context(OfficialSaver.from_conn_string(inner, **prefixes))
        saver.setup()
        super().__init__(saver, name="langgraph-redis")
        self.official = saver

    def _aggregate(self, index: str, query: str, fields: Sequence[str]) -> list[list[str]]:
        """Distinct combinations of ``fields`` (JSON paths) over the documents matching
        ``query``, read with a cursor (no result limit)."""
        client: Any = self.official._redis
        loads: list[str] = []
        for f in fields:
            loads += [f"$.{f}", "AS", f]
        group = [f"@{f}" for f in fields]
        reply = client.execute_command(
            "FT.AGGREGATE", index, query, "LOAD", str(len(loads)), *loads,
            "GROUPBY", str(len(group)), *group, "WITHCURSOR", "COUNT", "1000",
        )  # fmt: skip
        rows: list[list[str]] = []
        while True:
            result, cursor = reply
            for row in result[1:]:
                pairs = dict(zip(row[::2], row[1::2], strict=True))
                rows.append([_text(pairs.get(f.encode(), pairs.get(f, b""))) for f in fields])
            if not int(cursor):
                return rows
            reply = client.execute_command("FT.CURSOR", "READ", index, cursor, "COUNT", "1000")

    def thread_ids(self) -> list[str]:
        from langgraph.checkpoint.redis.util import from_storage_safe_id

        rows = self._aggregate(self.official._checkpoint_prefix, "*", ["thread_id"])
        return sorted({from_storage_safe_id(r[0]) for r in rows})

    def _thread_query(self, thread_id: str) -> str:
        from langgraph.checkpoint.redis.util import to_storage_safe_id
        from redisvl.query.filter import Tag

        return str(Tag("thread_id") == to_storage_safe_id(thread_id))

    def namespaces(self, thread_id: str) -> list[str]:
        from langgraph.checkpoint.redis.util import from_storage_safe_str

        rows = self._aggregate(
            self.official._checkpoint_prefix, self._thread_query(thread_id), ["checkpoint_ns"]
        )
        return sorted({from_storage_safe_str(r[0]) for r in rows})

    def checkpoints(self, thread_id: str, ns: str) -> list[CheckpointTuple]:
        # its list() gives pending writes in no particular order (its get_tuple() sorts
        # them, but finds none in a subgraph's namespace): sort them as get_tuple() would,
        # by task path, task id and index
        paths = self.task_paths(thread_id)
        items = super().checkpoints(thread_id, ns)
        for i, item in enumerate(items):
            if not item.pending_writes:
                continue
            cid = _id_of(item)
            position: dict[str, int] = {}
            keyed = []
            for task_id, channel, value in item.pending_writes:
                idx = WRITES_IDX_MAP.get(channel, position.get(task_id, 0))
                if channel not in WRITES_IDX_MAP:
                    position[task_id] = idx + 1
                keyed.append(
                    ((paths.get((ns, cid, task_id), ""), task_id, idx), (task_id, channel, value))
                )
            keyed.sort(key=lambda pair: pair[0])
            items[i] = item._replace(pending_writes=[w for _, w in keyed])
        return items

    def latest(self, thread_id: str, ns: str) -> CheckpointTuple | None:
        found = self.saver.get_tuple(_config(thread_id, ns))
        if found is None:
            return None
        same = [t for t in self.checkpoints(thread_id, ns) if _id_of(t) == _id_of(found)]
        return same[0] if same else found

    def task_paths(self, thread_id: str) -> dict[WriteKey, str]:
        from langgraph.checkpoint.redis.util import from_storage_safe_id, from_storage_safe_str

        rows = self._aggregate(
            self.official._checkpoint_write_prefix,
            self._thread_query(thread_id),
            ["checkpoint_ns", "checkpoint_id", "task_id", "task_path"],
        )
        return {
            (from_storage_safe_str(ns), from_storage_safe_id(cid), task): path
            for ns, cid, task, path in rows
        }


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


class _PlainRedisSource(Source):
    """langgraph-checkpoint-plainredis: threads from its registry hash ``P:threads``
    (task paths are not stored there)."""

    def __init__(self, url: str, stack: contextlib.ExitStack) -> None:
        from langgraph_checkpoint_plainredis import RedisSaver as PlainSaver

        inner, options = _split_query(url)
        prefix = options.pop("prefix", "lg")
        if options:
            raise ValueError(f"unknown option(s) in the source URL: {sorted(options)}")
        saver = PlainSaver(url=inner, prefix=prefix)
        stack.callback(saver.client.close)
        super().__init__(saver, name="plainredis")
        self.plain = saver

    def _registry(self) -> list[tuple[str, str]]:
        import json

        entries = self.plain.client.hvals(f"{self.plain.prefix}:threads")
        pairs = [json.loads(v) for v in entries]
        return [(str(p["thread"]), str(p["ns"])) for p in pairs]

    def thread_ids(self) -> list[str]:
        return sorted({t for t, _ in self._registry()})

    def namespaces(self, thread_id: str) -> list[str]:
        return sorted({ns for t, ns in self._registry() if t == thread_id})


class _ValkeySource(Source):
    """langgraph-checkpoint-aws's ValkeySaver: its ``list(None)`` lists nothing, so threads
    are found by a SCAN of its ``thread:{T}:NS`` keys (the whole database: it has no
    prefix; a thread id holding ``}:`` cannot be told apart). Task paths are not stored."""

    def __init__(self, url: str, stack: contextlib.ExitStack) -> None:
        from langgraph_checkpoint_aws.checkpoint.valkey import ValkeySaver

        saver = stack.enter_context(ValkeySaver.from_conn_string(url))
        super().__init__(saver, name="aws-valkey")
        self.client = saver.client

    def _scan(self, pattern: str) -> list[tuple[str, str]]:
        found = set()
        for key in self.client.scan_iter(match=pattern, count=1000):
            text = _text(key)[len("thread:{") :]
            thread_id, sep, ns = text.partition("}:")
            if sep:
                found.add((thread_id, ns))
        return sorted(found)

    def thread_ids(self) -> list[str]:
        return sorted({t for t, _ in self._scan("thread:{*}:*")})

    def namespaces(self, thread_id: str) -> list[str]:
        escaped = "".join("\\" + c if c in "*?[]\\" else c for c in thread_id)
        return [ns for t, ns in self._scan(f"thread:{{{escaped}}}:*") if t == thread_id]

    def checkpoints(self, thread_id: str, ns: str) -> list[CheckpointTuple]:
        # its timeline is a list that a second put of an id pushes again: one tuple per id
        unique = {_id_of(t): t for t in super().checkpoints(thread_id, ns)}
        return [unique[k] for k in sorted(unique)]


class _FactorySource(Source):
    def __init__(self, spec: str, stack: contextlib.ExitStack) -> None:
        import importlib

        module_name, _, attr = spec.partition(":")
        if not module_name or not attr:
            raise ValueError(f"invalid source {spec!r}: use python:package.module:factory")
        if "" not in sys.path and os.getcwd() not in sys.path:
            sys.path.insert(0, os.getcwd())  # as `python -m` would: modules of the directory
        made = getattr(importlib.import_module(module_name), attr)()
        if isinstance(made, contextlib.AbstractContextManager):
            made = stack.enter_context(made)
        if not isinstance(made, BaseCheckpointSaver):
            raise ValueError(f"python:{spec} gave {type(made).__name__}, not a checkpoint saver")
        super().__init__(made, name=spec)


_PRESETS: dict[str, Callable[[str, contextlib.ExitStack], Source]] = {
    "postgresql": _PostgresSource,
    "postgres": _PostgresSource,
    "langgraph-redis": _LangGraphRedisSource,
    "plainredis": _PlainRedisSource,
    "aws-valkey": _ValkeySource,
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
    with contextlib.ExitStack() as stack:
        try:
            source = _make_source(url, stack)
        except ModuleNotFoundError as exc:
            kind = url.partition(":")[0].partition("+")[0]
            if kind not in _SOURCE_PACKAGES:
                raise
            raise ValueError(
                f"reading a {kind} source needs the package that wrote it ({exc.name} is not "
                f"installed): pip install {_SOURCE_PACKAGES[kind]}"
            ) from exc
        yield source


def _make_source(url: str, stack: contextlib.ExitStack) -> Source:
    scheme, sep, rest = url.partition(":")
    kind, plus, inner_scheme = scheme.partition("+")
    if scheme in ("postgresql", "postgres"):
        return _PostgresSource(url, stack)
    if scheme == "sqlite":
        return _SqliteSource(url, stack)
    if scheme == "python" and sep:
        return _FactorySource(rest, stack)
    if plus and kind in _PRESETS and inner_scheme:
        return _PRESETS[kind](f"{inner_scheme}:{rest}", stack)
    known = ", ".join(SOURCE_SCHEMES)
    raise ValueError(f"unknown source {redact_url(url)!r}: use one of {known}")


# -- comparing -----------------------------------------------------------------------------


def _same(a: Any, b: Any, serde: Any) -> bool:
    """Equal, or (for objects without a useful ``==``) serialized the same way."""
    try:
        if a == b:
            return True
    except Exception:
        pass
    try:
        return bool(serde.dumps_typed(a) == serde.dumps_typed(b))
    except Exception:
        return False


def _writes_key(write: Any) -> tuple[str, str]:
    return (str(write[0]), str(write[1]))


def _differences(
    source: CheckpointTuple, target: CheckpointTuple | None, serde: Any, ordered: bool = True
) -> list[str]:
    if target is None:
        return ["missing in the target"]
    found = []
    src_cp: dict[str, Any] = dict(target_form(source.checkpoint))
    dst_cp: dict[str, Any] = dict(target.checkpoint)
    src_values: dict[str, Any] = src_cp.pop("channel_values", None) or {}
    dst_values: dict[str, Any] = dst_cp.pop("channel_values", None) or {}
    if set(src_values) != set(dst_values):
        found.append(f"channels {sorted(src_values)} != {sorted(dst_values)}")
    found += [
        f"value of channel {ch!r} differs"
        for ch in sorted(set(src_values) & set(dst_values))
        if not _same(src_values[ch], dst_values[ch], serde)
    ]
    src_cp.pop("pending_sends", None)  # legacy (v < 4): read back as writes of the parent
    dst_cp.pop("pending_sends", None)
    for key in sorted(set(src_cp) | set(dst_cp)):
        if not _same(src_cp.get(key), dst_cp.get(key), serde):
            found.append(f"checkpoint field {key!r} differs")
    expected_metadata = get_serializable_checkpoint_metadata({}, source.metadata)
    if not _same(dict(expected_metadata), dict(target.metadata), serde):
        found.append("metadata differs")
    src_parent = (source.parent_config or {}).get("configurable", {}).get("checkpoint_id")
    dst_parent = (target.parent_config or {}).get("configurable", {}).get("checkpoint_id")
    if (src_parent or None) != (dst_parent or None):
        found.append(f"parent {src_parent!r} != {dst_parent!r}")
    src_writes = list(source.pending_writes or [])
    dst_writes = list(target.pending_writes or [])
    if not ordered:
        src_writes.sort(key=_writes_key)
        dst_writes.sort(key=_writes_key)
    if len(src_writes) != len(dst_writes):
        found.append(f"{len(src_writes)} pending writes != {len(dst_writes)}")
    elif not all(
        w1[0] == w2[0] and w1[1] == w2[1] and _same(w1[2], w2[2], serde)
        for w1, w2 in zip(src_writes, dst_writes, strict=True)
    ):
        found.append("pending writes differ")
    return found


def _history_text(entry: Any) -> str:
    seed = "a seed" if "seed" in entry else "no seed"
    return f"{seed} and {len(entry.get('writes') or [])} writes"


def delta_differences(
    source: Source | BaseCheckpointSaver[Any],
    target: RedisSaver,
    thread_id: str,
    copied: dict[str, list[CheckpointTuple]],
) -> list[str]:
    """Where the target rebuilds a delta channel from other history than the source:
    ``get_delta_channel_history`` on both sides, at the oldest checkpoint of each chain in
    ``copied`` (its parent is not in it) and at the latest of each namespace. The rest of a
    chain holds the same checkpoints and writes on both sides (the verification compares
    them), so it rebuilds the same if its start does. Threads without delta channels cost
    nothing."""
    src = source if isinstance(source, Source) else Source(source)
    serde = target.serde
    problems: list[str] = []
    for ns, items in copied.items():
        ids = {_id_of(t) for t in items}
        starts = [t for t in items if _parent_id(t) not in ids and _parent_id(t) is not None]
        for item in {_id_of(t): t for t in [*starts, *items[-1:]]}.values():
            channels = _delta_channels(item)
            if not channels:
                continue
            config = _config(thread_id, ns, _id_of(item))
            want = src.saver.get_delta_channel_history(config=config, channels=channels)
            got = target.get_delta_channel_history(config=config, channels=channels)
            for channel in channels:
                a, b = want.get(channel) or {"writes": []}, got.get(channel) or {"writes": []}
                a_writes, b_writes = list(a["writes"]), list(b["writes"])
                if not src.has_task_paths:  # the target orders them by task path, then id
                    a_writes.sort(key=_writes_key)
                    b_writes.sort(key=_writes_key)
                same = (
                    ("seed" in a) == ("seed" in b)
                    and ("seed" not in a or _same(a.get("seed"), b.get("seed"), serde))
                    and len(a_writes) == len(b_writes)
                    and all(
                        w1[0] == w2[0] and w1[1] == w2[1] and _same(w1[2], w2[2], serde)
                        for w1, w2 in zip(a_writes, b_writes, strict=True)
                    )
                )
                if not same:
                    problems.append(
                        f"{thread_id!r} ns {ns!r} checkpoint {_id_of(item)}: delta channel "
                        f"{channel!r} is rebuilt from {_history_text(a)} in the source, from "
                        f"{_history_text(b)} in the target (ancestors the source no longer "
                        "gives: its state differs)"
                    )
    return problems


def verify_thread(
    source: Source | BaseCheckpointSaver[Any],
    target: RedisSaver,
    thread_id: str,
    *,
    namespaces: Sequence[str] | None = None,
    copied: dict[str, list[CheckpointTuple]] | None = None,
    delta: bool = True,
) -> list[str]:
    """What differs between the thread in the source and in the target (empty: the same):
    ``list`` of each namespace on both sides (ids and order), each checkpoint through the
    target's ``get_tuple`` and ``list``, the latest checkpoint through both sides'
    ``get_tuple``, and (``delta``) the history delta channels are rebuilt from
    (:func:`delta_differences`). ``copied`` is what was read from the source already (by
    namespace: :meth:`Source.checkpoints_to_copy`)."""
    src = source if isinstance(source, Source) else Source(source)
    serde = target.serde
    ordered = src.has_task_paths
    problems: list[str] = []
    nss = list(namespaces) if namespaces is not None else src.namespaces(thread_id)
    target_nss = {
        _ns_of(t) for t in target.list({"configurable": {"thread_id": thread_id}}, limit=None)
    }
    problems += [f"namespace {ns!r} only in the target" for ns in sorted(target_nss - set(nss))]
    read: dict[str, list[CheckpointTuple]] = {}
    for ns in nss:
        where = f"{thread_id!r} ns {ns!r}"
        expected = (copied or {}).get(ns)
        if expected is None:
            expected = src.checkpoints_to_copy(thread_id, ns)
        read[ns] = expected
        listed = list(target.list(_config(thread_id, ns)))
        src_ids = [_id_of(t) for t in reversed(expected)]  # newest first, as list gives them
        dst_ids = [_id_of(t) for t in listed]
        if src_ids != dst_ids:
            missing = len(set(src_ids) - set(dst_ids))
            extra = len(set(dst_ids) - set(src_ids))
            problems.append(
                f"{where}: list gives {len(dst_ids)} checkpoints, the source {len(src_ids)} "
                f"({missing} missing, {extra} extra{', order differs' if not missing else ''})"
            )
        by_id = {_id_of(t): t for t in listed}
        for item in expected:
            cid = _id_of(item)
            got = target.get_tuple(_config(thread_id, ns, cid))
            problems += [
                f"{where} checkpoint {cid}: {d}" for d in _differences(item, got, serde, ordered)
            ]
            if cid in by_id:
                problems += [
                    f"{where} checkpoint {cid} (list): {d}"
                    for d in _differences(item, by_id[cid], serde, ordered)
                ]
        src_latest = src.latest(thread_id, ns)
        dst_latest = target.get_tuple(_config(thread_id, ns))
        if src_latest is not None:
            problems += [
                f"{where} latest: {d}" for d in _differences(src_latest, dst_latest, serde, ordered)
            ]
    if delta:
        problems += delta_differences(src, target, thread_id, read)
    return problems


# -- copying -------------------------------------------------------------------------------


@dataclass
class ThreadReport:
    """What happened to one thread. ``status``: "copied" (written now), "present" (every
    checkpoint was in the target already), "to copy" (a dry run), "conflict" (the target
    has checkpoints the source lacks; left alone), "failed" (an error; see ``problems``),
    "incomplete" (copied, but the target rebuilds a delta channel from other history than the
    source: see ``problems``). ``carried``: checkpoints the source keeps without listing them,
    copied because delta channels are rebuilt from them (counted in ``namespaces``)."""

    thread_id: str
    status: Status
    namespaces: dict[str, int] = field(default_factory=dict)  # ns -> checkpoints
    writes: int = 0  # pending writes in the source
    carried: int = 0
    verified: bool | None = None  # None: not verified
    problems: list[str] = field(default_factory=list)

    @property
    def checkpoints(self) -> int:
        return sum(self.namespaces.values())


@dataclass
class MigrationReport:
    source: str
    dry_run: bool
    threads: list[ThreadReport] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return all(t.status not in ("conflict", "failed", "incomplete") and t.verified is not False
                   for t in self.threads)  # fmt: skip

    def count(self, status: Status) -> int:
        return sum(1 for t in self.threads if t.status == status)

    @property
    def checkpoints(self) -> int:
        return sum(t.checkpoints for t in self.threads)

    @property
    def writes(self) -> int:
        return sum(t.writes for t in self.threads)

    @property
    def verified(self) -> int:
        return sum(1 for t in self.threads if t.verified)

    def problems(self) -> list[str]:
        return [f"thread {t.thread_id!r}: {p}" for t in self.threads for p in t.problems]


def _version(value: Any) -> Any:
    # an int version (plainredis, BaseCheckpointSaver's default) as this saver writes them:
    # a graph that goes on with the copy compares its new versions with the stored ones
    if isinstance(value, int) and not isinstance(value, bool):
        return f"{value:016}.00000000"
    return value


def target_form(checkpoint: Checkpoint) -> Checkpoint:
    """The checkpoint as it is copied: integer channel versions (in ``channel_versions``
    and ``versions_seen``) as strings of this saver's form, their order kept."""
    versions = checkpoint.get("channel_versions") or {}
    seen = checkpoint.get("versions_seen") or {}
    if not any(
        isinstance(v, int)
        for v in itertools.chain(versions.values(), *map(dict.values, seen.values()))
    ):
        return checkpoint
    copy = dict(checkpoint)
    copy["channel_versions"] = {ch: _version(v) for ch, v in versions.items()}
    copy["versions_seen"] = {
        node: {ch: _version(v) for ch, v in channels.items()} for node, channels in seen.items()
    }
    return cast(Checkpoint, copy)


def _copy_namespace(
    target: RedisSaver,
    thread_id: str,
    ns: str,
    items: Sequence[CheckpointTuple],
    paths: dict[WriteKey, str],
    on_checkpoint: Callable[[], None] | None,
) -> None:
    for item in items:
        checkpoint = target_form(item.checkpoint)
        values = checkpoint.get("channel_values") or {}
        channel_versions = checkpoint.get("channel_versions") or {}
        versions = {ch: channel_versions[ch] for ch in values if ch in channel_versions}
        parent_id = (item.parent_config or {}).get("configurable", {}).get("checkpoint_id")
        config = _config(thread_id, ns, parent_id or None)
        stored = target.put(config, checkpoint, item.metadata, versions)
        by_task: dict[str, list[tuple[str, Any]]] = {}
        for task_id, channel, value in item.pending_writes or []:
            by_task.setdefault(task_id, []).append((channel, value))
        cid = _id_of(item)
        for task_id, writes in by_task.items():
            target.put_writes(stored, writes, task_id, paths.get((ns, cid, task_id), ""))
        if on_checkpoint is not None:
            on_checkpoint()


def migrate(
    source: Source | BaseCheckpointSaver[Any],
    target: RedisSaver,
    *,
    threads: Iterable[str] | None = None,
    dry_run: bool = False,
    verify: bool = True,
    recopy: bool = False,
    on_thread: Callable[[ThreadReport], None] | None = None,
    on_checkpoint: Callable[[], None] | None = None,
) -> MigrationReport:
    """Copy threads from ``source`` into ``target`` (see the module's documentation).

    Args:
        source: a :class:`Source` (from :func:`open_source`) or any saver with the
            synchronous API (its threads are found with ``list(None)``).
        target: the saver to copy into; one without ``keep_last`` keeps every checkpoint.
        threads: only these thread ids (default: every thread of the source).
        dry_run: read both sides and report what would be copied; write nothing.
        verify: read every thread back from both sides after copying it (and check the
            threads found present).
        recopy: copy threads that are present in the target too (puts replace by id).
        on_thread: called with each thread's report when it is done (progress).
        on_checkpoint: called after each checkpoint copied (progress).
    """
    src = source if isinstance(source, Source) else Source(source)
    began = time.monotonic()
    report = MigrationReport(source=src.name, dry_run=dry_run)
    thread_ids = list(dict.fromkeys(threads)) if threads is not None else src.thread_ids()
    for thread_id in thread_ids:
        entry = ThreadReport(thread_id, "failed")
        try:
            _migrate_thread(src, target, entry, dry_run=dry_run, verify=verify, recopy=recopy,
                            on_checkpoint=on_checkpoint)  # fmt: skip
        except Exception as exc:
            entry.status = "failed"
            entry.problems.append(f"{type(exc).__name__}: {exc}")
        report.threads.append(entry)
        if on_thread is not None:
            on_thread(entry)
    report.seconds = time.monotonic() - began
    return report


def _migrate_thread(
    src: Source,
    target: RedisSaver,
    entry: ThreadReport,
    *,
    dry_run: bool,
    verify: bool,
    recopy: bool,
    on_checkpoint: Callable[[], None] | None,
) -> None:
    thread_id = entry.thread_id
    namespaces = src.namespaces(thread_id)
    if not namespaces:
        entry.problems.append("no checkpoints in the source")
        return
    listed = {ns: src.checkpoints(thread_id, ns) for ns in namespaces}
    copied = {
        ns: sorted([*items, *src.delta_ancestors(thread_id, ns, items)], key=_id_of)
        for ns, items in listed.items()
    }
    entry.carried = sum(len(copied[ns]) - len(items) for ns, items in listed.items())
    entry.namespaces = {ns: len(items) for ns, items in copied.items()}
    entry.writes = sum(len(t.pending_writes or []) for items in copied.values() for t in items)
    source_ids = {(ns, _id_of(t)) for ns, items in copied.items() for t in items}
    in_target = {
        (_ns_of(t), _id_of(t)) for t in target.list({"configurable": {"thread_id": thread_id}})
    }
    if in_target - source_ids:
        entry.status = "conflict"
        entry.problems.append(
            f"the target has {len(in_target - source_ids)} checkpoint(s) of this thread that "
            "the source lacks: left alone (delete the thread in the target to copy it again)"
        )
        return
    present = in_target == source_ids
    if dry_run:
        entry.status = "present" if present else "to copy"
        return
    if present and not recopy:
        entry.status = "present"
        if verify:
            entry.problems += delta_differences(src, target, thread_id, copied)
    else:
        paths = src.task_paths(thread_id)
        for ns, items in copied.items():
            _copy_namespace(target, thread_id, ns, items, paths, on_checkpoint)
        entry.status = "copied"
        # (also without verify: a history that could not be carried is not "copied")
        entry.problems += delta_differences(src, target, thread_id, copied)
        if entry.problems:
            entry.status = "incomplete"
    if verify:
        entry.problems += verify_thread(src, target, thread_id, namespaces=namespaces,
                                        copied=copied, delta=False)  # fmt: skip
        entry.verified = not entry.problems
