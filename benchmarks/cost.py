#!/usr/bin/env python
"""Cost of a long chat: storage bytes per checkpoint and Redis CPU per turn, by saver.

    python benchmarks/cost.py                  # full run (a few minutes)
    python benchmarks/cost.py --quick          # small sizes, under a minute
    python benchmarks/cost.py --json out.json  # also write every figure
    python benchmarks/cost.py --savers rediskv,plainredis

A conversation is written straight through a saver's async API, the way a LangGraph chat
graph (START -> context -> agent -> memory -> END) writes it. One turn is 1 ``aget_tuple``,
5 ``aput`` (the input checkpoint, then one per step) and 4 ``aput_writes`` (one per task).
The state stays bounded as a long-running chat app keeps it: ``messages`` holds the last 20
messages of real prose (benchmarks/prose.py), the agent removes older ones as it answers,
and a ``summary`` of real prose is rewritten every 10 turns; so from turn 10 on a checkpoint
is about the same size.

Storage (``memory``): 100-turn conversations and one 1,000-turn conversation (measured at 10
turns too). Every Redis saver gets a private ``redis-server`` (no persistence), started and
stopped by this script, so ``used_memory`` belongs to the saver alone; the figure is its
delta, read with the saver's connections closed, from a baseline taken after one warm-up
turn (scripts loaded). ``MEMORY USAGE`` of every key, summed by key kind, gives a breakdown.
PostgreSQL: ``pg_total_relation_size`` of its tables (heap, TOAST, indexes) after ``VACUUM
(ANALYZE)``, in a database made for the run. SQLite: the database file after the saver
closes it (its WAL is checkpointed then). Every figure is compared with the serialized
payload: the serializer's bytes of each checkpoint without its values, of its metadata, of
each new channel value, and of every pending write's value. Each saver is handed the
versions its own ``get_next_version`` makes, as LangGraph hands them in a graph (this
package's: 25 characters; LangGraph's default format, InMemorySaver's and Postgres's: 52;
plainredis's: integers), so the payload differs a little between savers.

Redis CPU (``cpu``): on a fresh private server, ``used_cpu_user + used_cpu_sys`` (INFO cpu)
per chat turn, minus the idle server's own CPU over the same time, with enough turns that
the clock's resolution does not matter; ``INFO commandstats`` gives a finer view (the usec
of the commands the client sent; commands that a script or a MULTI/EXEC runs are inside
their EVALSHA / EXEC). Then ``aget_tuple``, ``aput`` and ``aput_writes`` are measured alone
in loops, and the requests are counted at redis-py's and valkey-py's connections.

The savers: this package's ``AsyncRedisSaver`` with its default settings (``rediskv``), with
``compression=False`` and with ``keep_last=1`` (reported "n/a" when this version of the
saver has no such option), langgraph-checkpoint-plainredis, langgraph-checkpoint-aws's
``AsyncValkeySaver``, ``AsyncPostgresSaver`` and ``AsyncSqliteSaver``. Tables go to stdout
as Markdown, progress to stderr.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime
import inspect
import json
import os
import platform
import random
import secrets
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import prose  # benchmarks/prose.py: the script's folder is on sys.path
import redis
from bench import PutArgs, payload_size, table
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, RemoveMessage
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver, ChannelVersions, empty_checkpoint
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

import langgraph.checkpoint.rediskv as rediskv
from langgraph.checkpoint.rediskv import AsyncRedisSaver

WINDOW = 20  # messages kept in the `messages` channel
SUMMARY_EVERY = 10  # turns between rewrites of `summary`
SUMMARY_SENTENCES = 12
PREFIX = "cost"  # key prefix of the savers that take one (each has its own server anyway)
THIS = "rediskv"


def log(*parts: Any) -> None:
    print(*parts, file=sys.stderr, flush=True)


# -- sizes ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Sizes:
    short_threads: int  # conversations of `short_turns` turns (written concurrently)
    short_turns: int
    long_turns: int  # one conversation this long (written turn after turn)
    early_turns: int  # the long conversation is also measured after this many turns
    cpu_rounds: int  # every CPU measurement runs once per round, savers interleaved
    cpu_conversations: int  # per round, one at a time
    cpu_concurrent: int  # per round, all at once
    cpu_turns: int  # per conversation
    op_gets: int  # aget_tuple calls in the op loop, per round
    op_turns: int  # turns whose puts, then writes, make the aput / aput_writes loops
    count_turns: int  # turns of the pass that counts requests
    idle_seconds: float  # how long the idle server's CPU is measured


FULL = Sizes(short_threads=5, short_turns=100, long_turns=1000, early_turns=10, cpu_rounds=7,
             cpu_conversations=2, cpu_concurrent=8, cpu_turns=50, op_gets=300, op_turns=40,
             count_turns=5, idle_seconds=3.0)
QUICK = Sizes(short_threads=2, short_turns=20, long_turns=100, early_turns=10, cpu_rounds=3,
              cpu_conversations=1, cpu_concurrent=4, cpu_turns=20, op_gets=100, op_turns=10,
              count_turns=3, idle_seconds=1.5)


# -- the conversation -----------------------------------------------------------------------


@dataclass
class Op:
    """One saver call of a chat turn."""

    kind: str  # "get", "put" or "writes"
    config: RunnableConfig
    put: PutArgs | None = None
    writes: list[tuple[str, Any]] = field(default_factory=list)
    task_id: str = ""
    task_path: str = ""


class Conversation:
    """The saver calls of one chat thread, turn by turn, as LangGraph makes them for the graph
    START -> context -> agent -> memory -> END: the input checkpoint holds the new human
    message in ``__start__``; each step's checkpoint follows its task's writes. Channel
    versions, ``versions_seen`` and ``updated_channels`` change as LangGraph changes them
    (checked against a real StateGraph). Same seed, same text and sizes.

    ``next_version``: the saver's ``get_next_version``, which LangGraph calls for every new
    version (so a saver stores versions of its own making: this package's take 25 characters,
    LangGraph's default format 52, plainredis's are integers); None: LangGraph's default
    format, as InMemorySaver and the Postgres saver make them (see :func:`conversation`)."""

    def __init__(self, thread_id: str, user_id: str, seed: int,
                 next_version: Callable[[Any, None], Any] | None = None) -> None:
        self.thread_id = thread_id
        self.user_id = user_id
        self.text = prose.ChatText(seed)
        self.rng = random.Random(f"{seed}:ids")
        self.next_version = next_version
        self.turn = 0
        self.step = -2
        self.counter = 0  # LangGraph's version counter: one increment per checkpoint
        self.version: Any = None  # the newest version (LangGraph's max of channel_versions)
        self.versions: dict[str, Any] = {}
        self.seen: dict[str, dict[str, Any]] = {"__input__": {}}
        self.values: dict[str, Any] = {}
        self.parent: str | None = None
        self.last_put: PutArgs | None = None

    def _uuid(self) -> str:
        return str(uuid.UUID(int=self.rng.getrandbits(128), version=4))

    def config(self, checkpoint_id: str | None = None) -> RunnableConfig:
        configurable: dict[str, Any] = {"thread_id": self.thread_id, "checkpoint_ns": ""}
        if checkpoint_id is not None:
            configurable["checkpoint_id"] = checkpoint_id
        return {"configurable": configurable}

    def _put(self, source: str, run_id: str, set_values: dict[str, Any], drop: Sequence[str],
             bump: Sequence[str], updated: Sequence[str], ran: tuple[str, str] | None) -> Op:
        if ran is not None:  # the task that ran saw its trigger at the version before
            node, trigger = ran
            self.seen[node] = {trigger: self.versions[trigger]}
        self.counter += 1
        drawn = self.rng.random()  # (drawn either way: the same ids and text for every saver)
        if self.next_version is None:
            version: Any = f"{self.counter:032}.{drawn:016}"
        else:
            version = self.next_version(self.version, None)
        self.version = version
        for channel in bump:
            self.versions[channel] = version
        for channel in drop:  # consumed: __start__ and the branch:to:* triggers
            self.values.pop(channel, None)
        self.values.update(set_values)
        self.step += 1
        checkpoint = empty_checkpoint()
        checkpoint["channel_values"] = dict(self.values)
        checkpoint["channel_versions"] = dict(self.versions)
        checkpoint["versions_seen"] = {k: dict(v) for k, v in self.seen.items()}
        checkpoint["updated_channels"] = sorted(updated)
        metadata: Any = {"source": source, "step": self.step, "parents": {}, "run_id": run_id,
                         "user_id": self.user_id}
        args = PutArgs(self.config(self.parent), checkpoint, metadata,
                       {c: self.versions[c] for c in bump})
        self.parent = checkpoint["id"]
        self.last_put = args
        return Op("put", args.config, put=args)

    def _writes(self, node: str, writes: list[tuple[str, Any]]) -> Op:
        return Op("writes", self.config(self.parent), writes=writes, task_id=self._uuid(),
                  task_path=f"~__pregel_pull, {node}")

    def next_turn(self) -> list[Op]:
        self.turn += 1
        t = self.turn
        run_id = self._uuid()
        human = HumanMessage(content=self.text.human(), id=self._uuid())
        ops = [Op("get", self.config())]
        # input: the new message waits in __start__
        ops.append(self._put("input", run_id,
                             {"__start__": {"messages": [human], "user_id": self.user_id}},
                             drop=(), bump=("__start__",), updated=("__start__",), ran=None))
        # step: __start__ writes the message (add_messages appends it)
        ops.append(self._writes("__start__", [
            ("messages", [human]), ("user_id", self.user_id), ("branch:to:context", None)]))
        messages: list[AnyMessage] = [*self.values.get("messages", []), human]
        ops.append(self._put(
            "loop", run_id,
            {"messages": messages, "user_id": self.user_id, "branch:to:context": None},
            drop=("__start__",), bump=("__start__", "messages", "user_id", "branch:to:context"),
            updated=("branch:to:context", "messages", "user_id"), ran=("__start__", "__start__")))
        # step: context loads the user's settings
        context = {"locale": "en-US", "plan": "pro", "tz": "Europe/Berlin", "turn": t,
                   "intent": self.rng.choice(("question", "follow-up", "task", "feedback"))}
        ops.append(self._writes("context", [
            ("context", context), ("turn", t), ("branch:to:agent", None)]))
        ops.append(self._put(
            "loop", run_id, {"context": context, "turn": t, "branch:to:agent": None},
            drop=("branch:to:context",), bump=("branch:to:context", "context", "turn",
                                               "branch:to:agent"),
            updated=("branch:to:agent", "context", "turn"), ran=("context", "branch:to:context")))
        # step: the agent answers and removes what falls out of the window
        chars = sum(len(str(m.content)) for m in messages)
        answer = self.text.assistant()
        ai = AIMessage(
            content=answer, id=self._uuid(),
            response_metadata={"model_name": "bench-model-1", "finish_reason": "stop"},
            usage_metadata={"input_tokens": chars // 4, "output_tokens": len(answer) // 4,
                            "total_tokens": (chars + len(answer)) // 4},
        )
        window = [*messages, ai]
        removed = window[: max(0, len(window) - WINDOW)]
        ops.append(self._writes("agent", [
            ("messages", [*(RemoveMessage(id=str(m.id)) for m in removed), ai]),
            ("branch:to:memory", None)]))
        ops.append(self._put(
            "loop", run_id, {"messages": window[len(removed):], "branch:to:memory": None},
            drop=("branch:to:agent",), bump=("messages", "branch:to:agent", "branch:to:memory"),
            updated=("branch:to:memory", "messages"), ran=("agent", "branch:to:agent")))
        # step: memory rewrites the summary every SUMMARY_EVERY turns, else writes nothing
        if t % SUMMARY_EVERY == 0:
            summary = self.text.summary(SUMMARY_SENTENCES)
            ops.append(self._writes("memory", [("summary", summary)]))
            ops.append(self._put(
                "loop", run_id, {"summary": summary}, drop=("branch:to:memory",),
                bump=("branch:to:memory", "summary"), updated=("summary",),
                ran=("memory", "branch:to:memory")))
        else:
            ops.append(self._writes("memory", [("__no_writes__", None)]))
            ops.append(self._put(
                "loop", run_id, {}, drop=("branch:to:memory",), bump=("branch:to:memory",),
                updated=(), ran=("memory", "branch:to:memory")))
        return ops

    def turns(self, n: int) -> Iterator[Op]:
        for _ in range(n):
            yield from self.next_turn()


def conversation(saver: BaseCheckpointSaver[Any], thread_id: str, user_id: str,
                 seed: int) -> Conversation:
    """A conversation with the versions that ``saver`` makes, as a graph on it has them
    (the floor, which stores nothing, makes none: LangGraph's default format)."""
    return Conversation(thread_id, user_id, seed, getattr(saver, "get_next_version", None))


async def apply(saver: BaseCheckpointSaver[Any], op: Op) -> None:
    if op.kind == "get":
        await saver.aget_tuple(op.config)
    elif op.kind == "put":
        a = op.put
        assert a is not None
        versions: ChannelVersions = dict(a.new_versions)
        await saver.aput(a.config, a.checkpoint, a.metadata, versions)
    else:
        await saver.aput_writes(op.config, op.writes, op.task_id, op.task_path)


async def apply_all(saver: BaseCheckpointSaver[Any], ops: Sequence[Op]) -> None:
    for op in ops:
        await apply(saver, op)


async def run_turns(saver: BaseCheckpointSaver[Any], conv: Conversation, n: int) -> None:
    for op in conv.turns(n):
        await apply(saver, op)


def payload_of(conv: Conversation, n: int) -> tuple[int, int]:
    """(serialized payload bytes, checkpoints) of the next ``n`` turns of ``conv``."""
    serde = JsonPlusSerializer()
    size = count = 0
    for op in conv.turns(n):
        if op.put is not None:
            size += payload_size(serde, op.put)
            count += 1
        for _channel, value in op.writes:
            size += len(serde.dumps_typed(value)[1])
    return size, count


def state_size(conv: Conversation) -> int:
    """Serialized bytes of the latest checkpoint in full: its body, its metadata and every
    channel value it holds. What a store that keeps one checkpoint cannot do without."""
    serde = JsonPlusSerializer()
    a = conv.last_put
    assert a is not None
    body = {k: v for k, v in a.checkpoint.items() if k != "channel_values"}
    return (len(serde.dumps_typed(body)[1]) + len(serde.dumps_typed(a.metadata)[1])
            + sum(len(serde.dumps_typed(v)[1]) for v in a.checkpoint["channel_values"].values()))


# -- private Redis server ---------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class PrivateRedis:
    """A redis-server of our own on a free port, persistence off: its used_memory and
    used_cpu_* are the benchmark's alone, and FLUSHALL / CONFIG are ours to use."""

    def __init__(self, binary: str) -> None:
        self.binary = binary
        self.port = free_port()
        self.dir = tempfile.mkdtemp(prefix="rediskv-cost-")
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.proc = subprocess.Popen(
            [binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "no", "--daemonize", "no", "--dir", self.dir],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        self.admin = redis.Redis(host="127.0.0.1", port=self.port, socket_timeout=60)
        deadline = time.monotonic() + 20
        while True:
            try:
                self.admin.ping()
                break
            except redis.ConnectionError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    raise SystemExit(f"{binary} did not start on port {self.port}") from None
                time.sleep(0.05)

    def info(self, section: str) -> dict[str, Any]:
        return self.admin.info(section)

    def cpu(self) -> float:
        info = self.info("cpu")
        return float(info["used_cpu_user"]) + float(info["used_cpu_sys"])

    def commandstats(self) -> dict[str, tuple[int, int]]:
        """{command: (calls, usec)}, ``client|setname`` style for subcommands."""
        return {k.removeprefix("cmdstat_"): (int(v["calls"]), int(v["usec"]))
                for k, v in self.info("commandstats").items()}

    async def used_memory_idle(self) -> int:
        """used_memory once only this admin connection is left and the figure has settled:
        closed clients are freed by the server's event loop a moment after they close, and
        some memory (about 15-20 KB after the first saver's connections) goes only within the
        next second."""
        for _ in range(200):
            if int(self.info("clients")["connected_clients"]) <= 1:
                break
            await asyncio.sleep(0.01)
        last, same = -1, 0
        for _ in range(40):  # 3 equal reads 100 ms apart, or 4 s
            used = int(self.info("memory")["used_memory"])
            same = same + 1 if used == last else 0
            if same == 2:
                break
            last = used
            await asyncio.sleep(0.1)
        return used

    def by_kind(self, kind_of: Callable[[str], str]) -> dict[str, list[int]]:
        """{kind: [keys, MEMORY USAGE bytes]} over every key."""
        out: dict[str, list[int]] = {}
        keys = [k.decode() for k in self.admin.scan_iter(count=1000)]
        for start in range(0, len(keys), 1000):
            chunk = keys[start : start + 1000]
            pipe = self.admin.pipeline(transaction=False)
            for key in chunk:
                pipe.memory_usage(key, samples=0)
            for key, size in zip(chunk, pipe.execute(), strict=True):
                entry = out.setdefault(kind_of(key), [0, 0])
                entry[0] += 1
                entry[1] += size or 0
        return out

    def stop(self) -> None:
        self.admin.close()
        self.proc.terminate()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        shutil.rmtree(self.dir, ignore_errors=True)


# -- the savers -----------------------------------------------------------------------------


class Unavailable(Exception):
    """This saver (variant) cannot run here; the message says why."""


class Store:
    """Where one saver keeps its data, and how many bytes that takes. ``open`` makes a new
    saver on it, ``close`` closes that saver's connections."""

    kind = ""  # what `size` measures

    async def open(self) -> BaseCheckpointSaver[Any]:
        raise NotImplementedError

    async def close(self) -> None:
        raise NotImplementedError

    async def size(self) -> int:
        raise NotImplementedError

    def by_kind(self) -> dict[str, list[int]]:
        return {}

    async def destroy(self) -> None:
        pass


@dataclass(frozen=True)
class Variant:
    name: str
    description: str
    make_store: Callable[[argparse.Namespace, str], Awaitable[Store]]
    redis: bool = False  # takes part in the Redis CPU measurements
    stores: bool = True  # measured for storage (the request floor stores nothing)


def rediskv_options_missing(options: dict[str, Any]) -> list[str]:
    """Options this version of AsyncRedisSaver does not take. Its ``**redis_kwargs`` would
    swallow an unknown keyword and fail only at the first connection, so read the
    signature instead of waiting for a TypeError."""
    params = inspect.signature(AsyncRedisSaver.__init__).parameters
    return [name for name in options if name not in params]


class RedisStore(Store):
    kind = "Redis used_memory"

    def __init__(self, server: PrivateRedis, factory: Callable[[str], Any],
                 closer: Callable[[Any], Awaitable[None]], kind_of: Callable[[str], str]):
        self.server = server
        self.factory = factory
        self.closer = closer
        self.kind_of = kind_of
        self.saver: Any = None

    async def open(self) -> BaseCheckpointSaver[Any]:
        self.saver = self.factory(self.server.url)
        return self.saver  # type: ignore[no-any-return]

    async def close(self) -> None:
        if self.saver is not None:
            await self.closer(self.saver)
            self.saver = None

    async def size(self) -> int:
        return await self.server.used_memory_idle()

    def by_kind(self) -> dict[str, list[int]]:
        return self.server.by_kind(self.kind_of)

    async def destroy(self) -> None:
        with contextlib.suppress(Exception):
            await self.close()
        self.server.stop()


def _second_part(key: str) -> str:
    parts = key.split(":")
    return parts[1] if len(parts) > 1 else parts[0]


def _first_part(key: str) -> str:
    return key.split(":")[0]


def rediskv_variant(name: str, description: str, stores: bool = True, **options: Any) -> Variant:
    async def make(args: argparse.Namespace, token: str) -> Store:
        missing = rediskv_options_missing(options)
        if missing:
            raise Unavailable(f"n/a (option not available: {', '.join(missing)})")

        async def close(saver: AsyncRedisSaver) -> None:
            await saver.aclose()

        server = PrivateRedis(args.redis_server)
        return RedisStore(server, lambda url: AsyncRedisSaver(url, prefix=PREFIX, **options),
                          close, _second_part)

    return Variant(name, description, make, redis=True, stores=stores)


async def make_plainredis(args: argparse.Namespace, token: str) -> Store:
    try:
        from langgraph_checkpoint_plainredis import AsyncRedisSaver as PlainAsyncRedisSaver
    except ImportError as exc:
        raise Unavailable(f"n/a ({exc}; pip install langgraph-checkpoint-plainredis)") from exc

    async def close(saver: Any) -> None:
        await saver.aclose()

    server = PrivateRedis(args.redis_server)
    return RedisStore(server, lambda url: PlainAsyncRedisSaver(url=url, prefix=PREFIX), close,
                      _second_part)


async def make_valkey(args: argparse.Namespace, token: str) -> Store:
    try:
        from langgraph_checkpoint_aws.checkpoint.valkey import AsyncValkeySaver
        from valkey.asyncio import Valkey as AsyncValkey
    except ImportError as exc:
        raise Unavailable(f"n/a ({exc}; pip install 'langgraph-checkpoint-aws[valkey]')") from exc

    def factory(url: str) -> Any:
        return AsyncValkeySaver(AsyncValkey.from_url(url))

    async def close(saver: Any) -> None:
        await saver.client.aclose()

    server = PrivateRedis(args.redis_server)
    return RedisStore(server, factory, close, _first_part)  # keys carry no prefix


class FloorSaver:
    """The least a saver that sends one request per call can cost the Redis server: each
    aget_tuple, aput and aput_writes is one EVALSHA of `return 1` over redis-py's asyncio
    client, and nothing else (it stores nothing). Measured in the same rounds as the savers,
    it shows what the one round trip per operation that LangGraph's API asks for costs
    before a saver does any work."""

    def __init__(self, url: str) -> None:
        import redis.asyncio

        self.client = redis.asyncio.Redis.from_url(url)
        self.sha: str | None = None

    async def _request(self) -> None:
        if self.sha is None:
            self.sha = await self.client.script_load("return 1")
        await self.client.evalsha(self.sha, 0)

    async def aget_tuple(self, config: RunnableConfig) -> None:
        await self._request()

    async def aput(self, config: RunnableConfig, *args: Any) -> RunnableConfig:
        await self._request()
        return config

    async def aput_writes(self, config: RunnableConfig, *args: Any) -> None:
        await self._request()


async def make_floor(args: argparse.Namespace, token: str) -> Store:
    async def close(saver: FloorSaver) -> None:
        await saver.client.aclose()

    return RedisStore(PrivateRedis(args.redis_server), FloorSaver, close, _second_part)


class PostgresStore(Store):
    kind = "PostgreSQL pg_total_relation_size"

    def __init__(self, admin_url: str, dbname: str) -> None:
        from psycopg.conninfo import make_conninfo

        self.admin_url = admin_url
        self.dbname = dbname
        self.url = make_conninfo(admin_url, dbname=dbname)
        self.pool: Any = None
        self.ready = False

    async def open(self) -> BaseCheckpointSaver[Any]:
        from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
        from psycopg.rows import dict_row
        from psycopg_pool import AsyncConnectionPool

        self.pool = AsyncConnectionPool(
            self.url, min_size=1, max_size=4, open=False,
            kwargs={"autocommit": True, "prepare_threshold": 0, "row_factory": dict_row},
        )
        await self.pool.open(wait=True)
        saver = AsyncPostgresSaver(self.pool)
        if not self.ready:
            await saver.setup()
            self.ready = True
        return saver

    async def close(self) -> None:
        if self.pool is not None:
            await self.pool.close()
            self.pool = None

    async def size(self) -> int:
        import psycopg

        async with await psycopg.AsyncConnection.connect(self.url, autocommit=True) as conn:
            await conn.execute("VACUUM (ANALYZE)")
            cur = await conn.execute(
                "SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) FROM pg_class c "
                "JOIN pg_namespace n ON n.oid = c.relnamespace "
                "WHERE n.nspname = 'public' AND c.relkind = 'r'")
            row = await cur.fetchone()
            return int(row[0]) if row else 0

    async def destroy(self) -> None:
        import psycopg
        from psycopg import sql

        with contextlib.suppress(Exception):
            await self.close()
        with psycopg.connect(self.admin_url, autocommit=True) as admin:
            admin.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(
                sql.Identifier(self.dbname)))


async def make_postgres(args: argparse.Namespace, token: str) -> Store:
    parts = urlsplit(args.postgres_url)
    host, port = parts.hostname or "127.0.0.1", parts.port or 5432
    try:
        with socket.create_connection((host, port), timeout=1.0):
            pass
    except OSError as exc:
        raise Unavailable(f"n/a (nothing listens at {host}:{port})") from exc
    try:
        import psycopg
        from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver  # noqa: F401
        from psycopg import sql
    except ImportError as exc:
        raise Unavailable(f"n/a ({exc}; pip install -e '.[bench]')") from exc
    dbname = f"bench_cost_{token}"
    with psycopg.connect(args.postgres_url, autocommit=True) as admin:
        admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(dbname)))
    return PostgresStore(args.postgres_url, dbname)


class SqliteStore(Store):
    kind = "SQLite file size"

    def __init__(self) -> None:
        self.dir = tempfile.mkdtemp(prefix="rediskv-cost-")
        self.path = os.path.join(self.dir, "checkpoints.sqlite")
        self.conn: Any = None

    async def open(self) -> BaseCheckpointSaver[Any]:
        import aiosqlite
        from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

        self.conn = await aiosqlite.connect(self.path)
        saver = AsyncSqliteSaver(self.conn)
        await saver.setup()
        return saver

    async def close(self) -> None:
        if self.conn is not None:
            await self.conn.close()  # the last connection checkpoints the WAL into the file
            self.conn = None

    async def size(self) -> int:
        return sum(os.path.getsize(p) for p in (self.path, self.path + "-wal")
                   if os.path.exists(p))

    async def destroy(self) -> None:
        with contextlib.suppress(Exception):
            await self.close()
        shutil.rmtree(self.dir, ignore_errors=True)


async def make_sqlite(args: argparse.Namespace, token: str) -> Store:
    try:
        import aiosqlite  # noqa: F401
        from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver  # noqa: F401
    except ImportError as exc:
        raise Unavailable(f"n/a ({exc}; pip install -e '.[bench]')") from exc
    return SqliteStore()


VARIANTS = (
    rediskv_variant(THIS, "this package's AsyncRedisSaver, default settings"),
    rediskv_variant("rediskv-nocompress", "AsyncRedisSaver(compression=False)",
                    compression=False),
    rediskv_variant("rediskv-keep1", "AsyncRedisSaver(keep_last=1)", keep_last=1),
    rediskv_variant("rediskv-scripts", "AsyncRedisSaver(functions=False): every call an "
                    "EVALSHA, as before the function library (Redis CPU only)", stores=False,
                    functions=False),
    Variant("plainredis", "langgraph-checkpoint-plainredis AsyncRedisSaver", make_plainredis,
            redis=True),
    Variant("valkey", "langgraph-checkpoint-aws AsyncValkeySaver", make_valkey, redis=True),
    Variant("floor", "one EVALSHA of `return 1` per call and nothing else (Redis CPU only)",
            make_floor, redis=True, stores=False),
    Variant("postgres", "AsyncPostgresSaver (pool, autocommit)", make_postgres),
    Variant("sqlite", "AsyncSqliteSaver (temporary file)", make_sqlite),
)
CPU_VARIANTS = (THIS, "rediskv-nocompress", "rediskv-scripts", "plainredis", "valkey", "floor")


# -- phase 1: storage ---------------------------------------------------------------------------


def kinds_delta(after: dict[str, list[int]], before: dict[str, list[int]]) -> dict[str, list[int]]:
    out = {}
    for kind, (keys, size) in after.items():
        k0, s0 = before.get(kind, [0, 0])
        if keys != k0 or size != s0:
            out[kind] = [keys - k0, size - s0]
    return out


async def check_latest(saver: BaseCheckpointSaver[Any], conv: Conversation) -> None:
    """A saver that swallows its errors (AsyncValkeySaver logs and returns None) must not
    pass for one that stored everything."""
    got = await saver.aget_tuple(conv.config())
    if got is None or got.checkpoint["id"] != conv.parent:
        raise RuntimeError(f"aget_tuple did not return the latest checkpoint of "
                           f"{conv.thread_id}: {got and got.checkpoint['id']} != {conv.parent}")


async def measure_storage(variant: Variant, args: argparse.Namespace, sizes: Sizes,
                          token: str) -> dict[str, Any]:
    store = await variant.make_store(args, token)
    try:
        saver = await store.open()
        versions = saver.get_next_version  # (its own: no state of the connection's)
        warm = Conversation("warm", "u-warm", 999_999, versions)
        await run_turns(saver, warm, 1)  # scripts loaded, tables made: not the data's cost
        await check_latest(saver, warm)
        await store.close()
        base, kinds0 = await store.size(), store.by_kind()

        t0 = time.perf_counter()
        saver = await store.open()
        shorts = [Conversation(f"short-{i}", f"u-{i}", i, versions)
                  for i in range(sizes.short_threads)]
        await asyncio.gather(*(run_turns(saver, c, sizes.short_turns) for c in shorts))
        await check_latest(saver, shorts[0])
        await store.close()
        after_short, kinds1 = await store.size(), store.by_kind()
        log(f"  {variant.name}: {sizes.short_threads} x {sizes.short_turns} turns in "
            f"{time.perf_counter() - t0:.1f}s")

        t0 = time.perf_counter()
        long = Conversation("long", "u-long", 1_000, versions)
        saver = await store.open()
        await run_turns(saver, long, sizes.early_turns)
        await store.close()
        at_early = await store.size()
        saver = await store.open()
        await run_turns(saver, long, sizes.long_turns - sizes.early_turns)
        await check_latest(saver, long)
        await store.close()
        after_long, kinds2 = await store.size(), store.by_kind()
        log(f"  {variant.name}: 1 x {sizes.long_turns} turns in "
            f"{time.perf_counter() - t0:.1f}s")
    finally:
        await store.destroy()
    return {
        "measured_as": store.kind,
        "payload": payloads(sizes, versions),
        "short_bytes": after_short - base,
        "long_early_bytes": at_early - after_short,
        "long_bytes": after_long - after_short,
        "short_by_kind": kinds_delta(kinds1, kinds0),
        "long_by_kind": kinds_delta(kinds2, kinds1),
    }


def payloads(sizes: Sizes,
             versions: Callable[[Any, None], Any] | None = None) -> dict[str, tuple[int, int]]:
    """Serialized payload and checkpoints of each conversation set, with the versions a saver
    makes (``versions``: its get_next_version; the same seeds, the same text for every saver,
    and the same versions but for their length); and as ``state_early`` / ``state_long`` the
    full size of the long conversation's latest checkpoint at both points (bytes, 1)."""
    short = [payload_of(Conversation(f"short-{i}", f"u-{i}", i, versions), sizes.short_turns)
             for i in range(sizes.short_threads)]
    long = Conversation("long", "u-long", 1_000, versions)
    early = payload_of(long, sizes.early_turns)
    state_early = state_size(long)
    rest = payload_of(long, sizes.long_turns - sizes.early_turns)
    return {
        "short": (sum(p for p, _ in short), sum(c for _, c in short)),
        "long_early": early,
        "long": (early[0] + rest[0], early[1] + rest[1]),
        "state_early": (state_early, 1),
        "state_long": (state_size(long), 1),
    }


# -- phase 2: Redis CPU ---------------------------------------------------------------------


class WireCounter:
    """Counts what redis-py's and valkey-py's connections send (sync and asyncio): requests
    (one per ``send_packed_command``: a pipeline is one) and the commands in them, with
    whether each was sent inside MULTI ... EXEC."""

    CONTAINERS = frozenset({b"client", b"script", b"config", b"memory", b"object",
                            b"function", b"command", b"cluster", b"acl", b"latency"})

    def __init__(self) -> None:
        self.requests = 0
        self.top: dict[str, int] = {}  # commands the server runs as sent
        self.queued: dict[str, int] = {}  # commands sent inside MULTI, run by EXEC
        self._saved: list[tuple[type, Any]] = []

    def _record(self, command: Any) -> None:
        self.requests += 1
        chunks = [command] if isinstance(command, bytes | bytearray | memoryview) else command
        data = b"".join(bytes(c) for c in chunks)
        in_multi = False
        for name in self.command_names(data):
            if name == "exec":
                in_multi = False
            target = self.queued if in_multi else self.top
            target[name] = target.get(name, 0) + 1
            if name == "multi":
                in_multi = True

    @classmethod
    def command_names(cls, data: bytes) -> Iterator[str]:
        """The command names in RESP-encoded requests (``client|setname`` style)."""
        pos = 0
        while pos < len(data):
            end = data.index(b"\r\n", pos)
            n = int(data[pos + 1 : end])
            pos = end + 2
            words: list[bytes] = []
            for i in range(n):
                end = data.index(b"\r\n", pos)
                size = int(data[pos + 1 : end])
                pos = end + 2
                if i < 2:
                    words.append(data[pos : pos + size].lower())
                pos += size + 2
            name = words[0]
            if name in cls.CONTAINERS and len(words) > 1:
                name += b"|" + words[1]
            yield name.decode()

    def __enter__(self) -> WireCounter:
        import redis.asyncio.connection as r_async
        import redis.connection as r_sync

        classes: list[type] = [r_sync.AbstractConnection, r_async.AbstractConnection]
        with contextlib.suppress(ImportError):
            import valkey.asyncio.connection as v_async
            import valkey.connection as v_sync

            classes += [v_sync.AbstractConnection, v_async.AbstractConnection]
        for cls in classes:
            orig = cls.send_packed_command  # type: ignore[attr-defined]
            self._saved.append((cls, orig))
            if inspect.iscoroutinefunction(orig):
                async def a_wrapped(conn: Any, command: Any, *a: Any, _o: Any = orig,
                                    **kw: Any) -> Any:
                    self._record(command)
                    return await _o(conn, command, *a, **kw)

                cls.send_packed_command = a_wrapped  # type: ignore[attr-defined]
            else:
                def s_wrapped(conn: Any, command: Any, *a: Any, _o: Any = orig,
                              **kw: Any) -> Any:
                    self._record(command)
                    return _o(conn, command, *a, **kw)

                cls.send_packed_command = s_wrapped  # type: ignore[attr-defined]
        return self

    def __exit__(self, *exc: object) -> None:
        for cls, orig in self._saved:
            cls.send_packed_command = orig  # type: ignore[attr-defined]


@dataclass
class Reading:
    """Server CPU, commandstats and client CPU at one moment."""

    server_cpu: float
    stats: dict[str, tuple[int, int]]
    client_cpu: float
    wall: float

    @classmethod
    def now(cls, server: PrivateRedis) -> Reading:
        return cls(server.cpu(), server.commandstats(), time.process_time(), time.perf_counter())


@dataclass
class Span:
    """What happened on the server between two readings."""

    server_cpu: float  # seconds, the idle server's share removed
    raw_server_cpu: float
    stats: dict[str, tuple[int, int]]  # calls, usec per command
    client_cpu: float
    wall: float

    @classmethod
    def between(cls, a: Reading, b: Reading, idle_rate: float) -> Span:
        stats = {}
        for name, (calls, usec) in b.stats.items():
            c0, u0 = a.stats.get(name, (0, 0))
            if calls != c0:
                stats[name] = (calls - c0, usec - u0)
        wall = b.wall - a.wall
        raw = b.server_cpu - a.server_cpu
        return cls(max(0.0, raw - idle_rate * wall), raw, stats, b.client_cpu - a.client_cpu,
                   wall)

    def usec(self, top_share: dict[str, float]) -> float:
        """Summed usec of the commands the client sent, each command counted once (commands
        that scripts and EXEC run are inside their time already)."""
        return sum(usec * top_share.get(name, 0.0) for name, (_c, usec) in self.stats.items())


def top_share(wire: WireCounter, span: Span) -> dict[str, float]:
    """For each command, the share of its calls (commandstats) that the client sent as a
    command of its own, from a counting pass: 1 for EVALSHA, 0 for what scripts run."""
    out = {}
    for name, (calls, _usec) in span.stats.items():
        if calls:
            out[name] = min(1.0, wire.top.get(name, 0) / calls)
    return out


async def idle_cpu_rate(binary: str, seconds: float) -> float:
    """Server CPU seconds per second of a server with one idle client (its cron jobs): the
    median of 0.5 s windows, since one window can catch a burst of the machine's noise."""
    server = PrivateRedis(binary)
    rates = []
    try:
        await asyncio.sleep(0.5)
        for _ in range(max(3, int(seconds / 0.5))):
            a = Reading.now(server)
            await asyncio.sleep(0.5)
            b = Reading.now(server)
            rates.append((b.server_cpu - a.server_cpu) / (b.wall - a.wall))
        return statistics.median(rates)
    finally:
        server.stop()


@dataclass
class CpuSubject:
    variant: Variant
    store: RedisStore
    saver: BaseCheckpointSaver[Any]
    spans: dict[str, list[tuple[Span, int]]] = field(default_factory=dict)  # (span, ops)
    wire: WireCounter | None = None
    wire_turns: int = 0
    share: dict[str, float] = field(default_factory=dict)
    ops_thread: Conversation | None = None  # the thread the op loops read and extend

    def add(self, label: str, span: Span, ops: int) -> None:
        self.spans.setdefault(label, []).append((span, ops))


async def measure_cpu(subjects: list[CpuSubject], sizes: Sizes, idle_rate: float) -> None:
    """Each round visits every saver (in a rotating order) and measures, for each: the turn
    loop one conversation at a time, the turn loop with conversations at once, and the
    aget_tuple / aput / aput_writes loops. Results are medians over rounds: on a shared
    (virtual) machine a process's CPU time sometimes jumps several-fold for a while, and a
    median of interleaved rounds shrugs that off."""
    for s in subjects:  # warm: scripts loaded, connections open
        warm = conversation(s.saver, "cpu-warm", "u-warm", 777)
        await run_turns(s.saver, warm, 2)
        if s.variant.stores:
            await check_latest(s.saver, warm)

    log("cpu: counting requests")
    for s in subjects:
        conv = conversation(s.saver, "cpu-count", "u-count", 778)
        await run_turns(s.saver, conv, 1)
        server = s.store.server
        ops = list(conv.turns(sizes.count_turns))
        a = Reading.now(server)
        with WireCounter() as wire:
            await apply_all(s.saver, ops)
        b = Reading.now(server)
        s.wire, s.wire_turns = wire, sizes.count_turns
        s.share = top_share(wire, Span.between(a, b, idle_rate))

    for s in subjects:
        s.ops_thread = conversation(s.saver, "cpu-ops", "u-ops", 900)
        await run_turns(s.saver, s.ops_thread, 20)

    for r in range(sizes.cpu_rounds):
        log(f"cpu: round {r + 1}/{sizes.cpu_rounds}")
        order = subjects[r % len(subjects):] + subjects[: r % len(subjects)]
        for s in order:
            await cpu_round(s, sizes, idle_rate, r)


async def cpu_round(s: CpuSubject, sizes: Sizes, idle_rate: float, r: int) -> None:
    server = s.store.server

    async def timed(label: str, ops: int, work: Awaitable[Any]) -> Span:
        a = Reading.now(server)
        await work
        span = Span.between(a, Reading.now(server), idle_rate)
        s.add(label, span, ops)
        return span

    # made before the clock starts: the client CPU is the saver's, not the generator's
    seq = [list(conversation(s.saver, f"seq-{r}-{k}", f"u-{k}", 100 * r + k).turns(
        sizes.cpu_turns)) for k in range(sizes.cpu_conversations)]
    conc = [list(conversation(s.saver, f"conc-{r}-{k}", f"u-{k}", 10_000 + 100 * r + k).turns(
        sizes.cpu_turns)) for k in range(sizes.cpu_concurrent)]

    async def one_at_a_time() -> None:
        for ops in seq:
            await apply_all(s.saver, ops)

    turns = sizes.cpu_conversations * sizes.cpu_turns
    span = await timed("turn_seq", turns, one_at_a_time())
    log(f"  {s.variant.name}: {span.server_cpu / turns * 1e6:,.0f} µs server CPU per turn")
    await timed("turn_conc", sizes.cpu_concurrent * sizes.cpu_turns,
                asyncio.gather(*(apply_all(s.saver, ops) for ops in conc)))

    conv = s.ops_thread
    assert conv is not None
    latest = conv.config()

    async def gets() -> None:
        for _ in range(sizes.op_gets):
            await s.saver.aget_tuple(latest)

    await timed("aget_tuple", sizes.op_gets, gets())
    ops = list(conv.turns(sizes.op_turns))
    for kind, label in (("put", "aput"), ("writes", "aput_writes")):
        chosen = [op for op in ops if op.kind == kind]
        await timed(label, len(chosen), apply_all(s.saver, chosen))


def cpu_results(s: CpuSubject) -> dict[str, Any]:
    """Per label: the median round of each figure (per op), and every round's server CPU."""
    out: dict[str, Any] = {}
    for label, spans in s.spans.items():
        def med(fn: Callable[[Span], float], spans: list[tuple[Span, int]] = spans) -> float:
            return statistics.median(fn(x) / n for x, n in spans)

        n_all = sum(n for _, n in spans)
        out[label] = {
            "ops": n_all,
            "rounds": len(spans),
            "server_cpu_us": med(lambda x: x.server_cpu * 1e6),
            "raw_server_cpu_us": med(lambda x: x.raw_server_cpu * 1e6),
            "commandstats_us": med(lambda x: x.usec(s.share)),
            "client_cpu_us": med(lambda x: x.client_cpu * 1e6),
            "wall_us": med(lambda x: x.wall * 1e6),
            "per_round_server_cpu_us": [x.server_cpu / n * 1e6 for x, n in spans],
            # every command the server ran, scripts' and EXEC's commands included (all rounds)
            "commandstats_per_op": {
                name: {"calls": round(sum(x.stats.get(name, (0, 0))[0] for x, _ in spans)
                                      / n_all, 2),
                       "usec": round(sum(x.stats.get(name, (0, 0))[1] for x, _ in spans)
                                     / n_all, 1)}
                for name in sorted({name for x, _ in spans for name in x.stats})},
        }
    if s.wire is not None:
        out["requests_per_turn"] = s.wire.requests / s.wire_turns
        out["commands_per_turn"] = (sum(s.wire.top.values())
                                    + sum(s.wire.queued.values())) / s.wire_turns
        out["commands_sent"] = {"top": s.wire.top, "in_multi": s.wire.queued}
    return out


# -- report ---------------------------------------------------------------------------------


def _b(x: float | None) -> str:
    return "–" if x is None else f"{x:,.0f}"


def _us(x: float | None) -> str:
    return "–" if x is None else f"{x:,.0f} µs"


@dataclass
class Target:
    name: str
    measured: str
    goal: str
    ok: bool | None
    detail: str

    def row(self) -> list[str]:
        result = "n/a" if self.ok is None else ("PASS" if self.ok else "MISS")
        return [self.name, self.measured, self.goal, result, self.detail]


def ratio_target(name: str, num: float | None, den: float | None, limit: float, strict: bool,
                 detail: str) -> Target:
    goal = f"{'<' if strict else '<='} {limit:g}x"
    if num is None or den is None or den <= 0:
        return Target(name, "–", goal, None, detail or "not measured")
    r = num / den
    return Target(name, f"{r:.2f}x", goal, r < limit if strict else r <= limit, detail)


def payload_for(storage: dict[str, Any], name: str,
                pay: dict[str, tuple[int, int]]) -> dict[str, tuple[int, int]]:
    """The payload of the conversations as saver ``name`` was handed them (its versions);
    ``pay`` (LangGraph's default versions) when it was not measured."""
    m = storage.get(name)
    return m["payload"] if m and "payload" in m else pay


def compute_targets(storage: dict[str, Any], pay: dict[str, tuple[int, int]],
                    cpu: dict[str, Any], sizes: Sizes) -> list[Target]:
    def per_ck(name: str, which: str) -> float | None:
        m = storage.get(name)
        if not m or "error" in m:
            return None
        return float(m[f"{which}_bytes"]) / pay[which][1]

    def payload_per_ck(name: str, which: str) -> float:
        own = payload_for(storage, name, pay)[which]
        return own[0] / own[1]

    t: list[Target] = []
    for which, label in (("short", f"{sizes.short_turns} turns"),
                         ("long", f"{sizes.long_turns:,} turns")):
        payload = payload_per_ck(THIS, which)
        ours, pg = per_ck(THIS, which), per_ck("postgres", which)
        t.append(ratio_target(
            f"default bytes/checkpoint vs serialized payload ({label})", ours, payload, 0.5,
            False, f"{_b(ours)} B vs {_b(payload)} B"))
        t.append(ratio_target(
            f"default bytes/checkpoint vs Postgres ({label})", ours, pg, 1.0, True,
            f"{_b(ours)} B vs {_b(pg)} B"))
        off, off_payload = per_ck("rediskv-nocompress", which), payload_per_ck(
            "rediskv-nocompress", which)
        t.append(ratio_target(
            f"compression=False bytes/checkpoint vs payload ({label})", off, off_payload, 1.1,
            False, f"{_b(off)} B vs {_b(off_payload)} B"))
    # The window holds different messages at the two points, and their text differs in length
    # (3-12 sentences an answer): compare bytes per byte of the live state, not raw bytes.
    k = storage.get("rediskv-keep1") or {"error": "not measured"}
    late, early = k.get("long_bytes"), k.get("long_early_bytes")
    keep1_pay = payload_for(storage, "rediskv-keep1", pay)
    s_late, s_early = keep1_pay["state_long"][0], keep1_pay["state_early"][0]
    if late and early:
        detail = (f"{_b(late)} B for a {_b(s_late)} B state vs {_b(early)} B for "
                  f"{_b(s_early)} B (raw ratio {late / early:.2f}x)")
    else:
        detail = str(k.get("error", "not measured"))
    t.append(ratio_target(
        f"keep_last=1: thread at {sizes.long_turns:,} turns vs at {sizes.early_turns} turns, "
        "per byte of live state", late / s_late if late else None,
        early / s_early if early else None, 1.1, False, detail))
    # rounds interleave the savers: compare each round's pair, take the median ratio
    ours_r = cpu.get(THIS, {}).get("turn_seq", {}).get("per_round_server_cpu_us")
    plain_r = cpu.get("plainredis", {}).get("turn_seq", {}).get("per_round_server_cpu_us")
    if ours_r and plain_r:
        ratios = [a / b for a, b in zip(ours_r, plain_r, strict=True)]
        r = statistics.median(ratios)
        floor_r = cpu.get("floor", {}).get("turn_seq", {}).get("per_round_server_cpu_us")
        floor = ""
        if floor_r:
            f = statistics.median(a / b for a, b in zip(floor_r, plain_r, strict=True))
            floor = (f"; the floor (one `return 1` request per call, 10 a turn) alone: "
                     f"{_us(statistics.median(floor_r))}, {f:.2f}x plainredis")
        t.append(Target(
            "Redis CPU per chat turn vs plainredis (median of per-round ratios)", f"{r:.2f}x",
            "<= 0.75x", r <= 0.75,
            f"{_us(statistics.median(ours_r))} vs {_us(statistics.median(plain_r))}; rounds "
            + ", ".join(f"{x:.2f}" for x in ratios) + floor))
    else:
        t.append(ratio_target("Redis CPU per chat turn vs plainredis", None, None, 0.75, False,
                              "not measured"))
    return t


def storage_tables(storage: dict[str, Any], pay: dict[str, tuple[int, int]], sizes: Sizes,
                   threads: dict[str, int]) -> str:
    out = []
    for which, title in (
        ("short", f"{sizes.short_threads} conversations of {sizes.short_turns} turns"),
        ("long", f"1 conversation of {sizes.long_turns:,} turns"),
    ):
        cks = pay[which][1]
        rows = []
        for name, m in storage.items():
            if "error" in m:
                rows.append([name, m["error"], "", "", "", ""])
                continue
            b, payload = m[f"{which}_bytes"], m["payload"][which][0]
            rows.append([name, m["measured_as"], f"{b / cks:,.0f}", f"{b / threads[which]:,.0f}",
                         f"{payload / cks:,.0f}", f"{b / payload:.2f}x"])
        out.append(f"### {title} ({cks:,} checkpoints)\n\n" + table(
            ["saver", "measured as", "bytes / checkpoint", "bytes / conversation",
             "payload / checkpoint", "ratio to payload"], rows))
    state = payload_for(storage, THIS, pay)
    rows = [["(latest checkpoint in full, serialized)", f"{state['state_early'][0]:,}",
             f"{state['state_long'][0]:,}",
             f"{state['state_long'][0] / state['state_early'][0]:.2f}x"]]
    for name, m in storage.items():
        if "error" not in m:
            rows.append([name, f"{m['long_early_bytes']:,}", f"{m['long_bytes']:,}",
                         f"{m['long_bytes'] / max(m['long_early_bytes'], 1):.2f}x"])
    out.append(f"### The {sizes.long_turns:,}-turn conversation at {sizes.early_turns} and at "
               f"{sizes.long_turns:,} turns (bytes)\n\n"
               + table(["saver", f"at {sizes.early_turns} turns", f"at {sizes.long_turns:,}",
                        "ratio"], rows))
    rows = []
    for name, m in storage.items():
        if "error" in m or not m["long_by_kind"]:
            continue
        kinds = sorted(m["long_by_kind"].items(), key=lambda kv: -kv[1][1])
        total = sum(v[1] for _, v in kinds)
        cks = pay["long"][1]
        rows.append([name, f"{total / cks:,.0f} ({total / max(m['long_bytes'], 1):.2f} of "
                           "used_memory)",
                     "; ".join(f"{k} {v[1] / cks:,.0f} ({v[0]:,} keys)" for k, v in kinds)])
    if rows:
        out.append(f"### Redis keys by kind, {sizes.long_turns:,}-turn conversation "
                   "(MEMORY USAGE, bytes per checkpoint)\n\n"
                   + table(["saver", "sum", "by kind (2nd part of the key name)"], rows))
    return "\n\n".join(out)


def cpu_table(cpu: dict[str, Any], sizes: Sizes) -> str:
    rows = []
    for name, r in cpu.items():
        if "error" in r:
            rows.append([name, r["error"], *[""] * 8])
            continue

        def op(label: str, r: dict[str, Any] = r) -> str:
            x = r[label]
            return f"{x['server_cpu_us']:,.0f} ({x['commandstats_us']:,.0f})"

        sum_ops = sum(r[k]["server_cpu_us"] * n for k, n in
                      (("aget_tuple", 1), ("aput", 5), ("aput_writes", 4)))
        seq, conc = r["turn_seq"], r["turn_conc"]
        rows.append([
            name, f"{seq['server_cpu_us']:,.0f} ({seq['commandstats_us']:,.0f})",
            f"{conc['server_cpu_us']:,.0f} ({conc['commandstats_us']:,.0f})",
            op("aget_tuple"), op("aput"), op("aput_writes"), f"{sum_ops:,.0f}",
            f"{r['requests_per_turn']:g} / {r['commands_per_turn']:g}",
            f"{seq['client_cpu_us']:,.0f} µs",
        ])
    n_conc = sizes.cpu_concurrent
    return table(
        ["saver", "per turn, 1 conversation at a time", f"per turn, {n_conc} at once",
         "aget_tuple", "aput", "aput_writes", "1 get + 5 puts + 4 writes",
         "requests / commands per turn", "client process CPU / turn"], rows)


def environment() -> dict[str, Any]:
    from importlib.metadata import PackageNotFoundError, version

    def git(*args: str) -> str:
        try:
            return subprocess.run(["git", *args], capture_output=True, text=True, check=True,
                                  cwd=Path(__file__).parent).stdout.strip()
        except (OSError, subprocess.CalledProcessError):
            return "?"

    here = Path(__file__).resolve().parent.parent
    dists = {}
    for dist in ("langgraph-checkpoint-rediskv", "langgraph-checkpoint", "redis", "hiredis",
                 "langgraph-checkpoint-plainredis", "langgraph-checkpoint-aws", "valkey",
                 "langgraph-checkpoint-postgres", "psycopg", "langgraph-checkpoint-sqlite",
                 "aiosqlite", "zstandard"):
        try:
            dists[dist] = version(dist)
        except PackageNotFoundError:
            dists[dist] = "-"
    return {
        "date": datetime.date.today().isoformat(),
        "commit": git("rev-parse", "--short", "HEAD"),
        # only meaningful when the saver is imported from this checkout
        "uncommitted_src": bool(git("status", "--porcelain", "--", "../src", "../lua"))
        and here in Path(rediskv.__file__).resolve().parents,
        "rediskv_from": str(Path(rediskv.__file__).parent),
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "versions": dists,
    }


# -- main -------------------------------------------------------------------------------------


async def run(args: argparse.Namespace) -> dict[str, Any]:
    sizes = QUICK if args.quick else FULL
    wanted = set(args.savers.split(",")) if args.savers else None
    variants = [v for v in VARIANTS if wanted is None or v.name in wanted]
    unknown = (wanted or set()) - {v.name for v in VARIANTS}
    if unknown:
        raise SystemExit(f"unknown savers: {', '.join(sorted(unknown))}")
    token = secrets.token_hex(4)
    started = time.perf_counter()
    env = environment()
    log(f"rediskv from {env['rediskv_from']} (commit {env['commit']})")

    log("payload: serializing the conversations (LangGraph's default versions)")
    pay = payloads(sizes)  # (each saver's own versions: measure_storage)

    storage: dict[str, Any] = {}
    for v in (v for v in variants if v.stores):
        log(f"storage: {v.name}")
        try:
            storage[v.name] = await measure_storage(v, args, sizes, token)
        except Unavailable as exc:
            log(f"  {v.name}: {exc}")
            storage[v.name] = {"error": str(exc)}

    cpu: dict[str, Any] = {}
    subjects: list[CpuSubject] = []
    cpu_variants = [v for v in variants if v.name in CPU_VARIANTS]
    if cpu_variants:
        log(f"cpu: idle server CPU over {sizes.idle_seconds:.0f}s")
        idle_rate = await idle_cpu_rate(args.redis_server, sizes.idle_seconds)
        try:
            for v in cpu_variants:
                try:
                    store = await v.make_store(args, token)
                except Unavailable as exc:
                    cpu[v.name] = {"error": str(exc)}
                    continue
                assert isinstance(store, RedisStore)
                subjects.append(CpuSubject(v, store, await store.open()))
            await measure_cpu(subjects, sizes, idle_rate)
            for s in subjects:
                cpu[s.variant.name] = cpu_results(s)
        finally:
            for s in subjects:
                await s.store.destroy()
        cpu = {v.name: cpu[v.name] for v in cpu_variants}  # in the order of VARIANTS
    else:
        idle_rate = 0.0

    targets = compute_targets(storage, pay, cpu, sizes)
    elapsed = time.perf_counter() - started
    threads = {"short": sizes.short_threads, "long": 1}

    mode = "quick" if args.quick else "full"
    print(f"# Cost: storage and Redis CPU per conversation ({mode} run, {elapsed:.0f} s)\n")
    print(f"{env['date']}, commit {env['commit']}"
          + (" with uncommitted changes in src/ or lua/" if env["uncommitted_src"] else "")
          + f", rediskv from `{env['rediskv_from']}`; Python {env['python']}, "
          f"{env['cpus']} CPUs; redis-server from `{args.redis_server}`. A chat turn is 1 "
          "aget_tuple + 5 aput + 4 aput_writes; `messages` keeps 20 messages of real prose.\n")
    print("Savers: " + "; ".join(f"`{v.name}`: {v.description}" for v in variants) + ".\n")
    print("## Storage\n")
    print("Payload: the serializer's bytes of each checkpoint without its values, its "
          "metadata, each new channel value, and each pending write's value. Bytes per "
          "checkpoint are per checkpoint written (5 per turn), also for keep_last. Each saver "
          "is handed the versions its own `get_next_version` makes, as LangGraph does (this "
          "package's take 25 characters, LangGraph's default format 52, plainredis's are "
          "integers), so the payload differs a little between savers.\n")
    print(storage_tables(storage, pay, sizes, threads))
    if cpu:
        print("\n## Redis CPU\n")
        print(f"Server CPU (`used_cpu_user + used_cpu_sys`, minus the idle server's "
              f"{idle_rate * 1e3:.2f} ms/s) in µs per turn or per call, and in parentheses "
              "the `INFO commandstats` usec of the commands the client sent. Each cell is the "
              f"median of {sizes.cpu_rounds} rounds; a round visits every saver (in a "
              f"rotating order) and runs {sizes.cpu_conversations} conversation(s) of "
              f"{sizes.cpu_turns} turns one at a time, {sizes.cpu_concurrent} at once, "
              f"{sizes.op_gets:,} aget_tuple of the latest checkpoint of a thread, then the "
              f"next {sizes.op_turns} turns' aput calls of that thread, then their "
              "aput_writes calls.\n")
        print(cpu_table(cpu, sizes))
    print("\n## Targets (this run)\n")
    print(table(["target", "measured", "goal", "result", "detail"], [t.row() for t in targets]))
    print()
    return {
        "mode": mode,
        "elapsed_s": round(elapsed, 1),
        "environment": env,
        "sizes": sizes.__dict__,
        "payload": {k: {"bytes": v[0], "checkpoints": v[1]} for k, v in pay.items()},
        "payload_by_saver": {
            name: {k: {"bytes": v[0], "checkpoints": v[1]} for k, v in m["payload"].items()}
            for name, m in storage.items() if "payload" in m
        },
        "storage": storage,
        "idle_server_cpu_ms_per_s": idle_rate * 1e3,
        "cpu": cpu,
        "targets": [{"target": t.name, "measured": t.measured, "goal": t.goal, "pass": t.ok,
                     "detail": t.detail} for t in targets],
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="small sizes: under a minute")
    parser.add_argument("--json", metavar="PATH", help="also write every figure as JSON")
    parser.add_argument("--savers", help="comma-separated subset of: "
                        + ", ".join(v.name for v in VARIANTS))
    parser.add_argument("--redis-server", default=shutil.which("redis-server")
                        or "/usr/bin/redis-server",
                        help="the redis-server binary for the private servers")
    parser.add_argument("--postgres-url", default=os.environ.get(
        "BENCH_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/postgres"),
        help="a database where the run may CREATE DATABASE (it drops what it made)")
    args = parser.parse_args(argv)
    out = asyncio.run(run(args))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=2, default=str)
        log(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
