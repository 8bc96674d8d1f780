"""The Redis-based sources: langgraph-checkpoint-redis (RediSearch), -plainredis (its
thread registry) and -aws (ValkeySaver, found by SCAN)."""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl, urlsplit, urlunsplit

from langgraph.checkpoint.base import WRITES_IDX_MAP, CheckpointTuple

from .common import WriteKey, config_for, id_of
from .source import Source


def _split_query(url: str) -> tuple[str, dict[str, str]]:
    parts = urlsplit(url)
    return urlunsplit(parts._replace(query="")), dict(parse_qsl(parts.query))


@dataclass(frozen=True, slots=True)
class OfficialInternals:
    """What the official saver uses but does not expose: its client and the names of its
    search indexes (which are also its key prefixes)."""

    client: Any
    checkpoint_index: str
    write_index: str


def official_internals(saver: Any) -> OfficialInternals:
    """The official saver's private attributes, read in this one place: its ``list(None)``
    stops at MAXSEARCHRESULTS and it has no call for a thread's namespaces or task paths, so
    the source asks its search indexes itself (FT.AGGREGATE), with its client. A release of
    langgraph-checkpoint-redis that renames them breaks this function only."""
    return OfficialInternals(
        client=saver._redis,
        checkpoint_index=saver._checkpoint_prefix,
        write_index=saver._checkpoint_write_prefix,
    )


class LangGraphRedisSource(Source):
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
        self.internals = official_internals(saver)

    def _aggregate(self, index: str, query: str, fields: Sequence[str]) -> list[list[str]]:
        """Distinct combinations of ``fields`` (JSON paths) over the documents matching
        ``query``, read with a cursor (no result limit)."""
        client = self.internals.client
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

        rows = self._aggregate(self.internals.checkpoint_index, "*", ["thread_id"])
        return sorted({from_storage_safe_id(r[0]) for r in rows})

    def _thread_query(self, thread_id: str) -> str:
        from langgraph.checkpoint.redis.util import to_storage_safe_id
        from redisvl.query.filter import Tag

        return str(Tag("thread_id") == to_storage_safe_id(thread_id))

    def namespaces(self, thread_id: str) -> list[str]:
        from langgraph.checkpoint.redis.util import from_storage_safe_str

        rows = self._aggregate(
            self.internals.checkpoint_index, self._thread_query(thread_id), ["checkpoint_ns"]
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
            cid = id_of(item)
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
        found = self.saver.get_tuple(config_for(thread_id, ns))
        if found is None:
            return None
        same = [t for t in self.checkpoints(thread_id, ns) if id_of(t) == id_of(found)]
        return same[0] if same else found

    def task_paths(self, thread_id: str) -> dict[WriteKey, str]:
        from langgraph.checkpoint.redis.util import from_storage_safe_id, from_storage_safe_str

        rows = self._aggregate(
            self.internals.write_index,
            self._thread_query(thread_id),
            ["checkpoint_ns", "checkpoint_id", "task_id", "task_path"],
        )
        return {
            (from_storage_safe_str(ns), from_storage_safe_id(cid), task): path
            for ns, cid, task, path in rows
        }


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


class PlainRedisSource(Source):
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


class ValkeySource(Source):
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
        unique = {id_of(t): t for t in super().checkpoints(thread_id, ns)}
        return [unique[k] for k in sorted(unique)]
