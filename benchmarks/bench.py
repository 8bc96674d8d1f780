#!/usr/bin/env python
"""Benchmark langgraph-checkpoint-rediskv against the other LangGraph checkpointers.

    pip install -e '.[bench]'
    python benchmarks/bench.py              # full run (several minutes)
    python benchmarks/bench.py --quick      # smaller sizes, under a minute
    python benchmarks/bench.py --json out.json
    python benchmarks/bench.py --profile    # cProfile of this saver's hot paths

Everything runs in one process, and every measurement is *interleaved*: each iteration
visits every saver once (in a rotating order), so drift of a loaded machine falls on all
savers alike. Tables go to stdout as Markdown, progress to stderr.

Savers: this package's AsyncRedisSaver and RedisSaver (sync API called directly),
InMemorySaver, AsyncPostgresSaver on a database created for the run (skipped when PostgreSQL
cannot be reached), AsyncSqliteSaver on a temporary file, and langgraph-checkpoint-plainredis's
AsyncRedisSaver. Each Redis saver gets a random key prefix *and* its own database number
(``--redis-db``, ``--redis-db + 1``, ``--redis-db + 2``) so that a SCAN of one saver never
walks the keys of another; only keys under those prefixes are ever deleted (no FLUSHDB).
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import gc
import json
import math
import os
import platform
import pstats
import random
import secrets
import shutil
import socket
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import Annotated, Any, TypedDict
from urllib.parse import urlsplit

import prose  # benchmarks/prose.py: the script's folder is on sys.path
import redis
import redis.asyncio.connection as aconnection
import redis.connection as sconnection
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    BaseCheckpointSaver,
    Checkpoint,
    CheckpointMetadata,
    empty_checkpoint,
    get_serializable_checkpoint_metadata,
)
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages

from langgraph.checkpoint.rediskv import AsyncRedisSaver, RedisSaver
from langgraph.checkpoint.rediskv.compression import REF_MARK
from langgraph.checkpoint.rediskv.core import INLINE_MARK
from langgraph.checkpoint.rediskv.keys import encode_part, parse_record

# The saver's default metadata index, plus the key the chat backend searches threads by.
INDEXED = ("source", "step", "run_id", "user_id")

# -- sizes ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Sizes:
    iters: int  # timed iterations per micro op and saver
    warmup: int  # untimed iterations first
    history: int  # checkpoints in the long thread (history scaling)
    threads: int  # threads in the big store (thread scaling)
    scale_iters: int  # timed iterations per scaling op and saver
    scale_warmup: int
    chat_threads: int
    chat_turns: int
    chat_reps: int  # chat loop repetitions per saver (interleaved)
    budget: float  # seconds of timed work per (op, saver); a slow saver stops early
    memory_threads: int
    memory_checkpoints: int  # per thread


FULL = Sizes(
    iters=300, warmup=20, history=10_000, threads=10_000, scale_iters=100, scale_warmup=3,
    chat_threads=20, chat_turns=20, chat_reps=5, budget=12.0,
    memory_threads=5, memory_checkpoints=20,
)
QUICK = Sizes(
    iters=50, warmup=5, history=1_000, threads=1_000, scale_iters=20, scale_warmup=1,
    chat_threads=10, chat_turns=10, chat_reps=1, budget=1.0,
    memory_threads=3, memory_checkpoints=10,
)
MIN_SAMPLES = 3  # a saver over budget still gets at least this many samples
SMALL_HISTORY = 10  # the short thread of the history scaling
MICRO_THREAD_CHECKPOINTS = 30  # the thread read by the micro ops
OTHER_THREADS = 20  # other threads in the micro store (for alist(None, ...))
OTHER_THREAD_CHECKPOINTS = 3
THIS = "rediskv-async"  # the saver the targets are about
THIS_SYNC = "rediskv-sync"


def log(*parts: Any) -> None:
    print(*parts, file=sys.stderr, flush=True)


# -- data: a realistic 10-channel chat checkpoint ------------------------------------------

CHANNELS = (
    "messages", "turn", "user_id", "summary", "context",
    "language", "intent", "tool_results", "scratchpad", "branch:to:bot",
)
STEP_CHANNELS = ("messages", "turn", "branch:to:bot")  # what one chat step changes


def _text(rng: random.Random, n_chars: int) -> str:
    """About ``n_chars`` characters of real prose (consecutive sentences of the corpus in
    benchmarks/data/prose.txt): repeated filler words would compress 5x, real text 3x."""
    return prose.text(rng, n_chars)


def make_messages(rng: random.Random, n: int, tag: str) -> list[AnyMessage]:
    messages: list[AnyMessage] = []
    for k in range(n):
        if k % 2 == 0:
            content = _text(rng, rng.randint(60, 240))
            messages.append(HumanMessage(content=content, id=f"{tag}-h{k}"))
        else:
            messages.append(
                AIMessage(
                    content=_text(rng, rng.randint(150, 600)),
                    id=f"{tag}-a{k}",
                    response_metadata={"model_name": "bench-model-1", "finish_reason": "stop"},
                    usage_metadata={
                        "input_tokens": 120 + 40 * k,
                        "output_tokens": 90,
                        "total_tokens": 210 + 40 * k,
                    },
                )
            )
    return messages


def chat_values(rng: random.Random, user_id: str, n_messages: int = 20) -> dict[str, Any]:
    return {
        "messages": make_messages(rng, n_messages, user_id),
        "turn": n_messages // 2,
        "user_id": user_id,
        "summary": _text(rng, 240),
        "context": {"locale": "en-US", "plan": "pro", "tz": "Europe/Berlin", "beta": False},
        "language": "en",
        "intent": "support",
        "tool_results": [
            {"tool": "lookup_order", "ok": True, "id": 4711},
            {"tool": "kb", "hits": 3},
        ],
        "scratchpad": {"notes": ["greeted", "asked for order id"], "attempts": 1},
        "branch:to:bot": None,
    }


def next_version(current: str | None) -> str:
    n = 0 if current is None else int(current.split(".")[0])
    return f"{n + 1:032}.{random.random():016}"


@dataclass
class PutArgs:
    config: RunnableConfig
    checkpoint: Checkpoint
    metadata: CheckpointMetadata
    new_versions: dict[str, str]


class ThreadBuilder:
    """Successive checkpoints of one thread, as a chat graph writes them: the first one stores
    every channel, each later one new versions of ``STEP_CHANNELS`` only."""

    def __init__(self, thread_id: str, values: dict[str, Any], user_id: str) -> None:
        self.thread_id = thread_id
        self.values = values
        self.user_id = user_id
        self.versions: dict[str, str] = {}
        self.parent: str | None = None
        self.step = -1
        self.ids: list[str] = []

    def next(self, changed: Sequence[str] = STEP_CHANNELS) -> PutArgs:
        if self.parent is None:
            changed = CHANNELS
        new_versions = {}
        for channel in changed:
            version = next_version(self.versions.get(channel))
            new_versions[channel] = self.versions[channel] = version
        checkpoint = empty_checkpoint()
        checkpoint["channel_values"] = self.values
        checkpoint["channel_versions"] = dict(self.versions)
        checkpoint["versions_seen"] = {
            "__input__": {},
            "__start__": {"__start__": self.versions["turn"]},
            "bot": {"messages": self.versions["messages"]},
        }
        checkpoint["updated_channels"] = list(changed)
        self.step += 1
        metadata: CheckpointMetadata = {
            "source": "input" if self.step % 3 == 0 else "loop",
            "step": self.step - 1,
            "parents": {},
            "user_id": self.user_id,  # type: ignore[typeddict-unknown-key]
        }
        configurable: dict[str, Any] = {"thread_id": self.thread_id, "checkpoint_ns": ""}
        if self.parent is not None:
            configurable["checkpoint_id"] = self.parent
        self.parent = checkpoint["id"]
        self.ids.append(checkpoint["id"])
        return PutArgs({"configurable": configurable}, checkpoint, metadata, new_versions)

    def config(self, checkpoint_id: str | None = None) -> RunnableConfig:
        configurable: dict[str, Any] = {"thread_id": self.thread_id, "checkpoint_ns": ""}
        if checkpoint_id is not None:
            configurable["checkpoint_id"] = checkpoint_id
        return {"configurable": configurable}


def payload_size(serde: Any, args: PutArgs) -> int:
    """Bytes of what a put has to store: the checkpoint without its values, the metadata, and
    each new channel value, as the serializer writes them."""
    body = {k: v for k, v in args.checkpoint.items() if k != "channel_values"}
    size = len(serde.dumps_typed(body)[1])
    metadata = get_serializable_checkpoint_metadata(args.config, args.metadata)
    size += len(serde.dumps_typed(metadata)[1])
    values = args.checkpoint["channel_values"]
    for channel in args.new_versions:
        if channel in values:
            size += len(serde.dumps_typed(values[channel])[1])
    return size


WRITES_VALUES: list[tuple[str, Any]] = [
    ("messages", [AIMessage(content="Sure, let me check that order for you.", id="w-ai-1")]),
    ("turn", 11),
    ("branch:to:bot", None),
]


# -- savers under test -------------------------------------------------------------------


@dataclass
class Subject:
    """One saver, with a uniform calling convention (sync savers are called directly)."""

    name: str
    saver: BaseCheckpointSaver[Any]
    is_sync: bool = False
    redis_url: str | None = None  # Redis savers: the database they use
    prefix: str | None = None
    admin: redis.Redis | None = None
    reset_fn: Callable[[], Awaitable[None]] | None = None
    close_fn: Callable[[], Awaitable[None]] | None = None
    floor: Callable[[], Awaitable[Any]] | None = None  # one bare EVALSHA (rediskv savers)
    state: dict[str, Any] = field(default_factory=dict)

    async def put(self, a: PutArgs) -> RunnableConfig:
        if self.is_sync:
            return self.saver.put(a.config, a.checkpoint, a.metadata, a.new_versions)
        return await self.saver.aput(a.config, a.checkpoint, a.metadata, a.new_versions)

    async def put_writes(self, config: RunnableConfig, writes: Any, task_id: str) -> None:
        if self.is_sync:
            self.saver.put_writes(config, writes, task_id)
        else:
            await self.saver.aput_writes(config, writes, task_id)

    async def get_tuple(self, config: RunnableConfig) -> Any:
        if self.is_sync:
            return self.saver.get_tuple(config)
        return await self.saver.aget_tuple(config)

    async def list(self, config: RunnableConfig | None, **kwargs: Any) -> list[Any]:
        if self.is_sync:
            return list(self.saver.list(config, **kwargs))
        return [t async for t in self.saver.alist(config, **kwargs)]

    async def reset(self) -> None:
        """Delete everything this saver stored (its prefix / tables / storage only)."""
        if self.admin is not None and self.prefix is not None:
            await asyncio.to_thread(delete_prefix, self.admin, self.prefix)
        if self.reset_fn is not None:
            await self.reset_fn()
        self.state.clear()

    async def close(self) -> None:
        try:
            await self.reset()
        finally:
            if self.close_fn is not None:
                await self.close_fn()
            if self.admin is not None:
                self.admin.close()


def delete_prefix(admin: redis.Redis, prefix: str) -> int:
    """UNLINK every key under ``prefix:`` (a random prefix this run made up)."""
    assert prefix.startswith("bench") and ":" not in prefix and "*" not in prefix
    deleted = 0
    batch: list[bytes] = []
    for key in admin.scan_iter(match=f"{prefix}:*", count=1000):
        batch.append(key)
        if len(batch) >= 500:
            deleted += admin.unlink(*batch)
            batch = []
    if batch:
        deleted += admin.unlink(*batch)
    return deleted


def load_tree_package(tree: str) -> Any:
    """The ``langgraph.checkpoint.rediskv`` package of another checkout, imported as
    ``rediskv_base`` (its modules import each other relatively; it finds its own ``lua/`` and
    its Function library is named after its own code, so both run side by side)."""
    import importlib.util

    package_dir = os.path.join(tree, "src", "langgraph", "checkpoint", "rediskv")
    spec = importlib.util.spec_from_file_location(
        "rediskv_base", os.path.join(package_dir, "__init__.py"),
        submodule_search_locations=[package_dir],
    )
    assert spec is not None and spec.loader is not None, tree
    module = importlib.util.module_from_spec(spec)
    sys.modules["rediskv_base"] = module
    spec.loader.exec_module(module)
    return module


def _redis_db_url(base: str, db: int) -> str:
    parts = urlsplit(base)
    return parts._replace(path=f"/{db}").geturl()


def _reachable(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=1.0):
            return True
    except OSError:
        return False


async def make_subjects(args: argparse.Namespace, token: str) -> tuple[list[Subject], list[str]]:
    wanted = set(args.savers.split(",")) if args.savers else None
    notes: list[str] = []
    subjects: list[Subject] = []

    def want(name: str) -> bool:
        return wanted is None or name in wanted

    redis_base = args.redis_url

    async def forget_registration(saver: RedisSaver | AsyncRedisSaver) -> None:
        # A reset deletes the prefix's keys, its registry of global indexes (P:mk) too, under
        # the live saver, which registers its indexes once: it would take the registry for
        # gone (as after a FLUSHDB with older writers about) and scan every thread on each
        # global filter. The next put registers them again, on the store now empty: "ready".
        saver._core.registered.clear()
        saver._core.lists_known_ready.clear()

    if want(THIS):
        url = _redis_db_url(redis_base, args.redis_db)
        saver = AsyncRedisSaver(url, prefix=f"bench{token}a", index_metadata=INDEXED)
        floor_script = saver.client.register_script("return 1")
        subjects.append(Subject(
            THIS, saver, redis_url=url, prefix=saver.prefix, admin=redis.Redis.from_url(url),
            close_fn=saver.aclose, floor=lambda s=floor_script: s(),
            reset_fn=lambda s=saver: forget_registration(s),
        ))
    if want(THIS_SYNC):
        url = _redis_db_url(redis_base, args.redis_db + 1)
        ssaver = RedisSaver(url, prefix=f"bench{token}s", index_metadata=INDEXED)
        sfloor = ssaver.client.register_script("return 1")

        async def sync_floor(s: Any = sfloor) -> Any:
            return s()

        async def close_sync(s: RedisSaver = ssaver) -> None:
            s.close()

        subjects.append(Subject(
            THIS_SYNC, ssaver, is_sync=True, redis_url=url, prefix=ssaver.prefix,
            admin=redis.Redis.from_url(url), close_fn=close_sync, floor=sync_floor,
            reset_fn=lambda s=ssaver: forget_registration(s),
        ))
    if args.base_tree:
        # Another checkout's saver in this same run (issue 28: "no regression against a base
        # in one interleaved run"): its package loaded under another name, its own Lua.
        base = load_tree_package(args.base_tree)
        url = _redis_db_url(redis_base, args.redis_db + 3)
        bsaver = base.AsyncRedisSaver(url, prefix=f"bench{token}b", index_metadata=INDEXED)
        bfloor = bsaver.client.register_script("return 1")
        subjects.append(Subject(
            THIS + "@base", bsaver, redis_url=url, prefix=bsaver.prefix,
            admin=redis.Redis.from_url(url), close_fn=bsaver.aclose,
            floor=lambda s=bfloor: s(), reset_fn=lambda s=bsaver: forget_registration(s),
        ))
    if want("inmemory"):
        mem = InMemorySaver()

        async def reset_mem(m: InMemorySaver = mem) -> None:
            m.storage.clear()
            m.writes.clear()
            m.blobs.clear()

        subjects.append(Subject("inmemory", mem, reset_fn=reset_mem))
    if want("postgres"):
        subject = await make_postgres(args.postgres_url, token, notes)
        if subject is not None:
            subjects.append(subject)
    if want("sqlite"):
        subject = await make_sqlite(notes)
        if subject is not None:
            subjects.append(subject)
    if want("plainredis"):
        try:
            from langgraph_checkpoint_plainredis import AsyncRedisSaver as PlainAsyncRedisSaver
        except ImportError:
            notes.append("plainredis skipped: pip install langgraph-checkpoint-plainredis")
        else:
            url = _redis_db_url(redis_base, args.redis_db + 2)
            psaver = PlainAsyncRedisSaver(url=url, prefix=f"bench{token}p")
            subjects.append(Subject(
                "plainredis", psaver, redis_url=url, prefix=psaver.prefix,
                admin=redis.Redis.from_url(url), close_fn=psaver.aclose,
            ))
    return subjects, notes


async def make_postgres(url: str, token: str, notes: list[str]) -> Subject | None:
    parts = urlsplit(url)
    if not _reachable(parts.hostname or "127.0.0.1", parts.port or 5432):
        notes.append(f"postgres skipped: nothing listens at {parts.hostname}:{parts.port or 5432}")
        return None
    try:
        import psycopg
        from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
        from psycopg import sql
        from psycopg.conninfo import make_conninfo
        from psycopg.rows import dict_row
        from psycopg_pool import AsyncConnectionPool
    except ImportError as exc:
        notes.append(f"postgres skipped: {exc} (pip install -e '.[bench]')")
        return None
    dbname = f"bench_rediskv_{token}"
    try:
        with psycopg.connect(url, autocommit=True) as admin:
            admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(dbname)))
    except psycopg.Error as exc:
        notes.append(f"postgres skipped: cannot create a database: {exc}")
        return None
    pool = AsyncConnectionPool(
        make_conninfo(url, dbname=dbname), min_size=1, max_size=4, open=False,
        kwargs={"autocommit": True, "prepare_threshold": 0, "row_factory": dict_row},
    )
    await pool.open(wait=True)
    saver = AsyncPostgresSaver(pool)  # type: ignore[arg-type]
    await saver.setup()

    async def reset() -> None:
        async with pool.connection() as conn:
            await conn.execute("TRUNCATE checkpoints, checkpoint_blobs, checkpoint_writes")

    async def close() -> None:
        await pool.close()
        with psycopg.connect(url, autocommit=True) as admin:
            admin.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(dbname))
            )

    return Subject("postgres", saver, reset_fn=reset, close_fn=close)


async def make_sqlite(notes: list[str]) -> Subject | None:
    try:
        import aiosqlite
        from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
    except ImportError as exc:
        notes.append(f"sqlite skipped: {exc} (pip install -e '.[bench]')")
        return None
    folder = tempfile.mkdtemp(prefix="bench-rediskv-")
    conn = await aiosqlite.connect(os.path.join(folder, "checkpoints.sqlite"))
    saver = AsyncSqliteSaver(conn)
    await saver.setup()

    async def reset() -> None:
        async with saver.lock:
            await conn.execute("DELETE FROM checkpoints")
            await conn.execute("DELETE FROM writes")
            await conn.commit()

    async def close() -> None:
        await conn.close()
        shutil.rmtree(folder, ignore_errors=True)

    return Subject("sqlite", saver, reset_fn=reset, close_fn=close)


# -- measuring ------------------------------------------------------------------------------


def percentile(samples: Sequence[float], p: float) -> float:
    """Nearest-rank percentile."""
    ordered = sorted(samples)
    rank = max(1, math.ceil(p / 100 * len(ordered)))
    return ordered[rank - 1]


@dataclass
class Stats:
    samples: list[float] = field(default_factory=list)
    truncated: bool = False  # stopped early: over the time budget

    @property
    def p50(self) -> float:
        return percentile(self.samples, 50)

    @property
    def p99(self) -> float:
        return percentile(self.samples, 99)

    def to_json(self) -> dict[str, Any]:
        if not self.samples:
            return {"n": 0}
        return {
            "n": len(self.samples),
            "p50_us": round(self.p50 * 1e6, 1),
            "p99_us": round(self.p99 * 1e6, 1),
            "mean_us": round(sum(self.samples) / len(self.samples) * 1e6, 1),
            "truncated": self.truncated,
        }


@dataclass
class Case:
    key: str
    label: str
    run: Callable[[Subject, Any], Awaitable[Any]]  # the timed call
    prepare: Callable[[Subject, int], Any] | None = None  # untimed; its result goes to run
    only: Callable[[Subject], bool] | None = None  # which savers take part

    def applies(self, subject: Subject) -> bool:
        return self.only is None or self.only(subject)


Results = dict[str, dict[str, Stats]]


async def round_robin(
    cases: Sequence[Case], subjects: Sequence[Subject], iters: int, warmup: int, budget: float
) -> Results:
    """Run every case ``warmup + iters`` times per saver, interleaved: iteration i visits each
    case, and within a case each saver once, starting at saver i (mod n)."""
    results: Results = {c.key: {s.name: Stats() for s in subjects if c.applies(s)} for c in cases}
    spent = {c.key: dict.fromkeys(results[c.key], 0.0) for c in cases}
    perf = time.perf_counter
    for i in range(warmup + iters):
        for case in cases:
            stats = results[case.key]
            active = [s for s in subjects if s.name in stats and not stats[s.name].truncated]
            if not active:
                continue
            start = i % len(active)
            for subject in active[start:] + active[:start]:
                arg = case.prepare(subject, i) if case.prepare else None
                t0 = perf()
                await case.run(subject, arg)
                elapsed = perf() - t0
                if i < warmup:
                    continue
                st = stats[subject.name]
                st.samples.append(elapsed)
                spent[case.key][subject.name] += elapsed
                if spent[case.key][subject.name] > budget and len(st.samples) >= MIN_SAMPLES:
                    st.truncated = len(st.samples) < iters
    return results


async def for_each_subject(
    subjects: Iterable[Subject], fn: Callable[[Subject], Awaitable[Any]]
) -> None:
    """Untimed set-up work, on every saver at once."""
    await asyncio.gather(*(fn(s) for s in subjects))


async def put_all(subject: Subject, items: Sequence[PutArgs], concurrency: int = 1) -> None:
    """Store ``items`` (in order when concurrency is 1)."""
    if subject.is_sync:
        def work() -> None:
            for a in items:
                subject.saver.put(a.config, a.checkpoint, a.metadata, a.new_versions)

        await asyncio.to_thread(work)
        return
    if concurrency <= 1:
        for a in items:
            await subject.put(a)
        return
    sem = asyncio.Semaphore(concurrency)

    async def one(a: PutArgs) -> None:
        async with sem:
            await subject.put(a)

    for start in range(0, len(items), 2000):
        await asyncio.gather(*(one(a) for a in items[start : start + 2000]))


# -- round trips ----------------------------------------------------------------------------


class RoundTripCounter:
    """Counts ``send_packed_command`` calls of redis-py's sync and asyncio connections: one
    per request, or per pipeline, sent to the server."""

    def __init__(self) -> None:
        self.count = 0
        self._saved: list[tuple[type, Any]] = []

    def __enter__(self) -> RoundTripCounter:
        counter = self
        s_orig = sconnection.AbstractConnection.send_packed_command
        a_orig = aconnection.AbstractConnection.send_packed_command

        def s_wrapped(conn: Any, *args: Any, **kwargs: Any) -> Any:
            counter.count += 1
            return s_orig(conn, *args, **kwargs)

        async def a_wrapped(conn: Any, *args: Any, **kwargs: Any) -> Any:
            counter.count += 1
            return await a_orig(conn, *args, **kwargs)

        self._saved = [
            (sconnection.AbstractConnection, s_orig),
            (aconnection.AbstractConnection, a_orig),
        ]
        sconnection.AbstractConnection.send_packed_command = s_wrapped  # type: ignore[method-assign]
        aconnection.AbstractConnection.send_packed_command = a_wrapped  # type: ignore[method-assign]
        return self

    def __exit__(self, *exc: object) -> None:
        for cls, orig in self._saved:
            cls.send_packed_command = orig  # type: ignore[attr-defined]


async def count_round_trips(case: Case, subject: Subject, first: int, calls: int = 5) -> float:
    for k in range(2):  # warm: scripts loaded, connections open
        await case.run(subject, case.prepare(subject, first + k) if case.prepare else None)
    total = 0
    for k in range(calls):
        arg = case.prepare(subject, first + 2 + k) if case.prepare else None
        with RoundTripCounter() as counter:
            await case.run(subject, arg)
        total += counter.count
    return total / calls


# -- phase 1: micro ops ------------------------------------------------------------------


async def setup_micro(subject: Subject) -> None:
    rng = random.Random(1)  # the same data for every saver
    reader = ThreadBuilder("micro-read", chat_values(rng, "u-read"), "u-read")
    items = [reader.next() for _ in range(MICRO_THREAD_CHECKPOINTS)]
    others = []
    for k in range(OTHER_THREADS):
        user = f"u-{k:05d}"
        b = ThreadBuilder(f"micro-other-{k}", chat_values(rng, user, 6), user)
        others += [b.next() for _ in range(OTHER_THREAD_CHECKPOINTS)]
    await put_all(subject, items)
    await put_all(subject, others)
    # every checkpoint but the latest has the 3 writes of the step that followed it
    for cid in reader.ids[:-1]:
        await subject.put_writes(reader.config(cid), WRITES_VALUES, f"task-{cid[-12:]}")
    writer = ThreadBuilder(f"micro-write-{subject.name}", chat_values(rng, "u-write"), "u-write")
    await subject.put(writer.next())
    subject.state.update(reader=reader, writer=writer, written=[], filter_user="u-00007")


def micro_cases() -> list[Case]:
    def prep_put(s: Subject, i: int) -> PutArgs:
        return s.state["writer"].next()

    async def run_put(s: Subject, a: PutArgs) -> None:
        s.state["written"].append(await s.put(a))

    def prep_writes(s: Subject, i: int) -> tuple[RunnableConfig, str]:
        written = s.state["written"]
        return written[i % len(written)], f"00000000-0000-4000-8000-{i:012d}"

    async def run_writes(s: Subject, a: tuple[RunnableConfig, str]) -> None:
        await s.put_writes(a[0], WRITES_VALUES, a[1])

    def latest(s: Subject, i: int) -> RunnableConfig:
        return s.state["reader"].config()

    def by_id(s: Subject, i: int) -> RunnableConfig:
        reader = s.state["reader"]
        return reader.config(reader.ids[len(reader.ids) // 2])

    async def get(s: Subject, config: RunnableConfig) -> None:
        assert await s.get_tuple(config) is not None

    async def list10(s: Subject, config: RunnableConfig) -> None:
        assert len(await s.list(config, limit=10)) == 10

    async def list_filter(s: Subject, config: RunnableConfig) -> None:
        assert len(await s.list(config, filter={"source": "input"}, limit=10)) == 10

    async def list_all(s: Subject, arg: Any) -> None:
        found = await s.list(None, filter={"user_id": s.state["filter_user"]}, limit=10)
        assert len(found) == OTHER_THREAD_CHECKPOINTS, len(found)

    async def floor(s: Subject, arg: Any) -> None:
        assert s.floor is not None
        await s.floor()

    return [
        Case("aput", "aput (10-channel chat checkpoint, 3 new blobs)", run_put, prep_put),
        Case("aput_writes", "aput_writes (3 writes)", run_writes, prep_writes),
        Case("aget_tuple_latest", "aget_tuple latest", get, latest),
        Case("aget_tuple_id", "aget_tuple by id", get, by_id),
        Case("alist_limit10", "alist(thread, limit=10)", list10, latest),
        Case("alist_filter", 'alist(thread, filter={"source": "input"}, limit=10)',
             list_filter, latest),
        Case("alist_all_filter", 'alist(None, filter={"user_id": X}, limit=10), 22 threads',
             list_all),
        Case("evalsha_floor", "(floor) one bare EVALSHA `return 1`", floor,
             only=lambda s: s.floor is not None),
    ]


async def phase_micro(
    subjects: list[Subject], sizes: Sizes
) -> tuple[Results, dict[str, dict[str, float]]]:
    log("micro: setting up stores")
    await for_each_subject(subjects, setup_micro)
    cases = micro_cases()
    log(f"micro: {len(cases)} ops x {sizes.iters} iterations, interleaved")
    gc.collect()
    results = await round_robin(cases, subjects, sizes.iters, sizes.warmup, sizes.budget)
    log("micro: counting Redis round trips")
    trips: dict[str, dict[str, float]] = {}
    for subject in subjects:
        if subject.redis_url is None:
            continue
        for case in cases:
            if case.applies(subject):
                trips.setdefault(case.key, {})[subject.name] = await count_round_trips(
                    case, subject, 100_000
                )
    return results, trips


# -- phase 2: Redis memory per checkpoint ------------------------------------------------


async def phase_memory(subjects: list[Subject], sizes: Sizes) -> dict[str, dict[str, float]]:
    out: dict[str, dict[str, float]] = {}
    for subject in subjects:
        if subject.admin is None or subject.name == THIS_SYNC:  # same layout as THIS
            continue
        await subject.reset()
        rng = random.Random(2)
        payload = 0
        count = 0
        for t in range(sizes.memory_threads):
            user = f"u-mem-{t}"
            b = ThreadBuilder(f"mem-{t}", chat_values(rng, user), user)
            items = [b.next() for _ in range(sizes.memory_checkpoints)]
            payload += sum(payload_size(subject.saver.serde, a) for a in items)
            count += len(items)
            await put_all(subject, items)
        admin, prefix = subject.admin, subject.prefix
        keys = list(admin.scan_iter(match=f"{prefix}:*", count=1000))
        pipe = admin.pipeline(transaction=False)
        for key in keys:
            pipe.memory_usage(key, samples=0)
        sizes_of = [v or 0 for v in pipe.execute()]
        used = sum(sizes_of)
        by_kind: dict[str, list[int]] = {}  # "cp", "blob", "idx", ...: [keys, bytes]
        for key, size in zip(keys, sizes_of, strict=True):
            entry = by_kind.setdefault(key.decode().split(":")[1], [0, 0])
            entry[0] += 1
            entry[1] += size
        out[subject.name] = {
            "checkpoints": count,
            "keys": len(keys),
            "redis_bytes_per_checkpoint": used / count,
            "payload_bytes_per_checkpoint": payload / count,
            "ratio": used / payload,
            "by_key_kind": {k: {"keys": v[0], "bytes_per_checkpoint": v[1] / count}
                            for k, v in sorted(by_kind.items())},
        }
        await subject.reset()
    return out


# -- phase 3: a real StateGraph chat loop ------------------------------------------------


class ChatState(TypedDict):
    messages: Annotated[list[AnyMessage], add_messages]
    turn: int
    user_id: str


def build_chat_graph(saver: BaseCheckpointSaver[Any]) -> Any:
    """START -> bot -> END; the bot answers deterministically (no LLM)."""

    def bot(state: ChatState) -> dict[str, Any]:
        turn = state.get("turn", 0) + 1
        last = state["messages"][-1]
        text = str(last.content)
        reply = f"Turn {turn}: you said {len(text)} characters. " + text[::-1][:200]
        return {"messages": [AIMessage(content=reply, id=f"ai-{turn}")], "turn": turn}

    builder = StateGraph(ChatState)
    builder.add_node("bot", bot)
    builder.add_edge(START, "bot")
    builder.add_edge("bot", END)
    return builder.compile(checkpointer=saver)


@dataclass
class ChatRun:
    turns_per_s: list[float] = field(default_factory=list)  # one per repetition
    cpu_per_turn: list[float] = field(default_factory=list)  # process CPU seconds, per rep
    latencies: list[float] = field(default_factory=list)
    turns: int = 0
    round_trips_per_turn: int | None = None


async def chat_loop(
    subject: Subject, graph: Any, sizes: Sizes, tag: str
) -> tuple[float, list[float]]:
    """``chat_threads`` conversations at once, ``chat_turns`` turns each; returns turns/s and
    the turn latencies. The sync saver drives graph.invoke from that many worker threads."""
    rng = random.Random(3)
    prompts = [_text(rng, rng.randint(40, 200)) for _ in range(sizes.chat_turns)]
    perf = time.perf_counter

    def inputs(k: int, t: int) -> tuple[dict[str, Any], RunnableConfig]:
        return (
            {"messages": [HumanMessage(content=prompts[t], id=f"h-{t}")], "user_id": f"u-{k}"},
            {"configurable": {"thread_id": f"chat-{tag}-{k}"}},
        )

    async def conversation(k: int) -> list[float]:
        lat = []
        for t in range(sizes.chat_turns):
            state, config = inputs(k, t)
            t0 = perf()
            await graph.ainvoke(state, config)
            lat.append(perf() - t0)
        return lat

    def conversation_sync(k: int) -> list[float]:
        lat = []
        for t in range(sizes.chat_turns):
            state, config = inputs(k, t)
            t0 = perf()
            graph.invoke(state, config)
            lat.append(perf() - t0)
        return lat

    start, cpu0 = perf(), time.process_time()
    if subject.is_sync:
        loop = asyncio.get_running_loop()
        with ThreadPoolExecutor(max_workers=sizes.chat_threads) as pool:
            runs = await asyncio.gather(*(
                loop.run_in_executor(pool, conversation_sync, k)
                for k in range(sizes.chat_threads)
            ))
    else:
        runs = await asyncio.gather(*(conversation(k) for k in range(sizes.chat_threads)))
    wall = perf() - start
    turns = sizes.chat_threads * sizes.chat_turns
    subject.state["chat_cpu"] = (time.process_time() - cpu0) / turns  # all threads of the process
    latencies = [x for run in runs for x in run]
    return len(latencies) / wall, latencies


async def phase_chat(subjects: list[Subject], sizes: Sizes) -> dict[str, ChatRun]:
    await for_each_subject(subjects, Subject.reset)
    graphs = {s.name: build_chat_graph(s.saver) for s in subjects}
    out = {s.name: ChatRun() for s in subjects}
    for s in subjects:  # warm-up: one short conversation each
        await chat_loop(s, graphs[s.name], replace(sizes, chat_threads=2, chat_turns=2), "warm")
    for rep in range(sizes.chat_reps):
        order = subjects[rep % len(subjects):] + subjects[: rep % len(subjects)]
        for s in order:
            gc.collect()
            rate, lat = await chat_loop(s, graphs[s.name], sizes, f"r{rep}")
            out[s.name].turns_per_s.append(rate)
            out[s.name].cpu_per_turn.append(s.state.pop("chat_cpu"))
            out[s.name].latencies += lat
            out[s.name].turns += len(lat)
            log(f"chat: rep {rep + 1}/{sizes.chat_reps} {s.name}: {rate:.0f} turns/s")
    for s in subjects:
        if s.redis_url is not None:
            graph = graphs[s.name]
            config: RunnableConfig = {"configurable": {"thread_id": "chat-trips"}}
            turn = {"messages": [HumanMessage(content="hello there", id="h-x")], "user_id": "u"}
            if s.is_sync:
                graph.invoke(turn, config)
            else:
                await graph.ainvoke(turn, config)
            with RoundTripCounter() as counter:
                if s.is_sync:
                    graph.invoke(turn, config)
                else:
                    await graph.ainvoke(turn, config)
            out[s.name].round_trips_per_turn = counter.count
    return out


# -- phase 4: scaling ---------------------------------------------------------------------


def scaling_cases(sizes_label: Sequence[tuple[str, str]]) -> list[Case]:
    """put / get_tuple latest / list page (limit 10) on each thread named in ``sizes_label``
    (state key of its ThreadBuilder, label)."""
    cases: list[Case] = []
    for key, label in sizes_label:
        def prep_put(s: Subject, i: int, key: str = key) -> PutArgs:
            return s.state[key].next()

        def cfg(s: Subject, i: int, key: str = key) -> RunnableConfig:
            return s.state[key].config()

        async def put(s: Subject, a: PutArgs) -> None:
            await s.put(a)

        async def get(s: Subject, config: RunnableConfig) -> None:
            assert await s.get_tuple(config) is not None

        async def page(s: Subject, config: RunnableConfig) -> None:
            assert len(await s.list(config, limit=10)) == 10

        cases += [
            Case(f"get_tuple@{label}", f"get_tuple latest @ {label}", get, cfg),
            Case(f"list_page@{label}", f"list page (limit 10) @ {label}", page, cfg),
            Case(f"put@{label}", f"put @ {label}", put, prep_put),
        ]
    return cases


async def scale_round_robin(
    cases: Sequence[Case], subjects: Sequence[Subject], sizes: Sizes
) -> Results:
    return await round_robin(cases, subjects, sizes.scale_iters, sizes.scale_warmup, sizes.budget)


async def phase_history(subjects: list[Subject], sizes: Sizes) -> Results:
    await for_each_subject(subjects, Subject.reset)
    big = sizes.history

    async def setup(s: Subject) -> None:
        rng = random.Random(4)
        small_b = ThreadBuilder("hist-small", chat_values(rng, "u-hs"), "u-hs")
        big_b = ThreadBuilder("hist-big", chat_values(rng, "u-hb"), "u-hb")
        await put_all(s, [small_b.next() for _ in range(SMALL_HISTORY)])
        t0 = time.perf_counter()
        # the long history: most steps change only `turn`, so the store stays small
        await put_all(s, [big_b.next(("turn",)) for _ in range(big)])
        log(f"history: {s.name}: {big:,} checkpoints stored in {time.perf_counter() - t0:.1f}s")
        s.state.update(small=small_b, big=big_b)

    log(f"history: storing {SMALL_HISTORY} and {big:,} checkpoints in one thread per saver")
    await for_each_subject(subjects, setup)
    cases = scaling_cases([("small", f"{SMALL_HISTORY}"), ("big", f"{big:,}")])
    gc.collect()
    return await scale_round_robin(cases, subjects, sizes)


async def phase_threads(subjects: list[Subject], sizes: Sizes) -> Results:
    await for_each_subject(subjects, Subject.reset)
    many = sizes.threads
    target_user = "u-target"

    async def setup_one(s: Subject) -> None:
        rng = random.Random(5)
        b = ThreadBuilder("thr-0", chat_values(rng, target_user), target_user)
        await put_all(s, [b.next() for _ in range(SMALL_HISTORY)])
        s.state.update(t=b)

    async def list_all(s: Subject, arg: Any) -> None:
        found = await s.list(None, filter={"user_id": target_user}, limit=10)
        assert len(found) == 10, len(found)

    def cases(label: str) -> list[Case]:
        return [
            *scaling_cases([("t", label)]),
            Case(f"list_all_filter@{label}",
                 f'alist(None, filter={{"user_id": X}}, limit=10) @ {label}', list_all),
        ]

    await for_each_subject(subjects, setup_one)
    gc.collect()
    results = await scale_round_robin(cases("1 thread"), subjects, sizes)

    async def setup_many(s: Subject) -> None:
        rng = random.Random(6)
        values = [chat_values(rng, f"u-{k}", 4) for k in range(8)]  # a short chat each
        items = []
        for k in range(1, many):
            user = f"u-{k:06d}"
            b = ThreadBuilder(f"thr-{k}", values[k % 8], user)
            items.append(b.next())
        t0 = time.perf_counter()
        await put_all(s, items, concurrency=16)
        log(f"threads: {s.name}: {many - 1:,} threads stored in {time.perf_counter() - t0:.1f}s")

    log(f"threads: storing {many - 1:,} more threads per saver")
    await for_each_subject(subjects, setup_many)
    gc.collect()
    label = f"{many:,} threads"
    results.update(await scale_round_robin(cases(label), subjects, sizes))
    return results


# -- report ---------------------------------------------------------------------------------


def fmt_t(seconds: float | None) -> str:
    if seconds is None:
        return "–"
    us = seconds * 1e6
    if us < 1000:
        return f"{us:.0f} µs"
    if us < 100_000:
        return f"{us / 1000:.2f} ms"
    return f"{us / 1000:.0f} ms"


def table(headers: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def cell(st: Stats | None) -> str:
    if st is None or not st.samples:
        return "–"
    more = f" (n={len(st.samples)})" if st.truncated else ""
    return f"{fmt_t(st.p50)} / {fmt_t(st.p99)}{more}"


def p50(results: Results, case: str, name: str) -> float | None:
    st = results.get(case, {}).get(name)
    return st.p50 if st is not None and st.samples else None


@dataclass
class Target:
    name: str
    measured: float | None  # the ratio
    goal: str
    ok: bool | None
    detail: str

    def row(self) -> list[str]:
        measured = "–" if self.measured is None else f"{self.measured:.2f}x"
        result = "n/a" if self.ok is None else ("PASS" if self.ok else "MISS")
        return [self.name, measured, self.goal, result, self.detail]


def ratio_target(name: str, num: float | None, den: float | None, limit: float, at_most: bool,
                 detail: str) -> Target:
    if num is None or den is None or den == 0:
        return Target(name, None, f"{'<=' if at_most else '>='} {limit}x", None,
                      detail + " (a saver was not measured)")
    r = num / den
    return Target(name, r, f"{'<=' if at_most else '>='} {limit}x",
                  r <= limit if at_most else r >= limit, detail)


def compute_targets(micro: Results, chat: dict[str, ChatRun], memory: dict[str, Any],
                    history: Results, threads: Results, sizes: Sizes) -> list[Target]:
    t: list[Target] = []
    get = p50(micro, "aget_tuple_latest", THIS)
    mem_get = p50(micro, "aget_tuple_latest", "inmemory")
    floor = p50(micro, "evalsha_floor", THIS)
    ref = mem_get + floor if mem_get is not None and floor is not None else None
    t.append(ratio_target(
        "aget_tuple latest vs (InMemorySaver aget_tuple + 1 asyncio EVALSHA)", get, ref, 1.15,
        True, f"{fmt_t(get)} vs {fmt_t(mem_get)} + {fmt_t(floor)}"))
    put, pg_put = p50(micro, "aput", THIS), p50(micro, "aput", "postgres")
    t.append(ratio_target("aput vs postgres aput", put, pg_put, 0.5, True,
                          f"{fmt_t(put)} vs {fmt_t(pg_put)}"))
    lst, mem_lst = p50(micro, "alist_limit10", THIS), p50(micro, "alist_limit10", "inmemory")
    t.append(ratio_target("alist(thread, limit=10) vs InMemorySaver", lst, mem_lst, 1.5, True,
                          f"{fmt_t(lst)} vs {fmt_t(mem_lst)}"))

    for other, limit in (("plainredis", 1.5), ("postgres", 2.0)):
        # the median over repetitions of this rep's ratio: the two ran back to back
        ours, theirs = chat.get(THIS), chat.get(other)
        if ours and theirs and ours.turns_per_s and theirs.turns_per_s:
            ratios = [a / b for a, b in zip(ours.turns_per_s, theirs.turns_per_s, strict=True)]
            r = median(ratios)
            t.append(Target(
                f"chat loop turns/s vs {other}", r, f">= {limit}x", r >= limit,
                f"{_num(median(ours.turns_per_s))} vs {_num(median(theirs.turns_per_s))} "
                f"turns/s; per-rep ratios {', '.join(f'{x:.2f}' for x in ratios)}"))
        else:
            t.append(ratio_target(f"chat loop turns/s vs {other}", None, None, limit, False, ""))
    m = memory.get(THIS)
    t.append(ratio_target(
        "Redis memory per checkpoint vs serialized payload",
        m["redis_bytes_per_checkpoint"] if m else None,
        m["payload_bytes_per_checkpoint"] if m else None, 1.1, True,
        f"{m['redis_bytes_per_checkpoint']:,.0f} B vs {m['payload_bytes_per_checkpoint']:,.0f} B"
        if m else ""))
    big = f"{sizes.history:,}"
    for op in ("put", "get_tuple", "list_page"):
        a, b = p50(history, f"{op}@{SMALL_HISTORY}", THIS), p50(history, f"{op}@{big}", THIS)
        t.append(ratio_target(f"{op} flat from {SMALL_HISTORY} to {big} checkpoints", b, a, 1.2,
                              True, f"{fmt_t(b)} vs {fmt_t(a)}"))
    label = f"{sizes.threads:,} threads"
    ours = p50(threads, f"list_all_filter@{label}", THIS)
    pg = p50(threads, f"list_all_filter@{label}", "postgres")
    t.append(ratio_target(f"alist(None, filter user_id, limit=10) @ {label} vs postgres",
                          ours, pg, 1.0, True, f"{fmt_t(ours)} vs {fmt_t(pg)}"))
    return t


def median(values: Sequence[float]) -> float:
    return sorted(values)[len(values) // 2]


def _num(x: float | None) -> str:
    return "–" if x is None else f"{x:,.0f}"


def scaling_rows(results: Results, subjects: Sequence[Subject], small: str, big: str,
                 ops: Sequence[tuple[str, str]]) -> list[list[str]]:
    rows = []
    for op, label in ops:
        for s in subjects:
            a = results.get(f"{op}@{small}", {}).get(s.name)
            b = results.get(f"{op}@{big}", {}).get(s.name)
            if not (a and a.samples and b and b.samples):
                continue
            rows.append([label, s.name, cell(a), cell(b), f"{b.p50 / a.p50:.2f}x"])
    return rows


# -- profiling ------------------------------------------------------------------------------
# cProfile's shares are of *profiled* time: Python-level calls are inflated more than C code.

CATEGORIES = (
    ("serde (JsonPlus/msgpack + langchain message (de)construction)",
     ("langgraph/checkpoint/serde", "ormsgpack", "langchain_core", "pydantic")),
    ("this saver: core/ / keys.py", ("rediskv/core/", "rediskv/keys.py")),
    ("this saver: transport aio.py / sync.py", ("rediskv/aio.py", "rediskv/sync.py")),
    ("redis-py (encoding, parsing, pool)", ("/redis/", "hiredis")),
    ("asyncio event loop", ("asyncio/", "selectors.py")),
    ("langgraph pregel / graph", ("langgraph/pregel", "langgraph/graph", "langgraph/channels",
                                  "langgraph/_internal", "langgraph/utils")),
)


def categorize(stats: pstats.Stats) -> list[tuple[str, float]]:
    totals: dict[str, float] = {}
    for (filename, _line, func), (_cc, _nc, tt, _ct, _callers) in stats.stats.items():  # type: ignore[attr-defined]
        name = "other"
        path = filename.replace("\\", "/")
        if filename == "~":  # a C function: sort it by its name
            if any(w in func for w in ("socket", "select", "epoll", "send", "recv")):
                name = "C: socket / select"
            elif "pack" in func:
                name = CATEGORIES[0][0]
            elif "hiredis" in func:
                name = CATEGORIES[3][0]
            else:
                name = "C: builtins (str/bytes/dict/list ops, isinstance, ...)"
        else:
            for label, needles in CATEGORIES:
                if any(n in path for n in needles):
                    name = label
                    break
        totals[name] = totals.get(name, 0.0) + tt
    return sorted(totals.items(), key=lambda kv: -kv[1])


def _server_usec(admin: redis.Redis) -> tuple[int, int]:
    """(calls, usec) of script calls on the server so far, EVALSHA and FCALL (the saver's
    operations run as functions of its library where it can: README, option functions)."""
    stats = admin.info("commandstats")
    calls = usec = 0
    for command in ("cmdstat_evalsha", "cmdstat_fcall"):
        calls += int(stats.get(command, {}).get("calls", 0))
        usec += int(stats.get(command, {}).get("usec", 0))
    return calls, usec


def _cpu_per_call(fn: Callable[[], Any], n: int) -> float:
    cpu = time.process_time
    c0 = cpu()
    for _ in range(n):
        fn()
    return (cpu() - c0) / n


async def profile_run(args: argparse.Namespace, token: str) -> None:
    """Where the time of this saver's aget_tuple, aput and chat turn goes.

    1. Un-profiled: wall and client CPU per call, the server's EVALSHA time per call (INFO
       commandstats; flagged when other clients ran EVALSHA meanwhile), and the pure-CPU cost
       of each client-side stage measured on its own: serde, our encoding/decoding around it,
       redis-py's command packing.
    2. cProfile (its default wall-clock timer: cheap, but time the process spends preempted
       on a busy machine lands in whatever function was running), grouped by package, and the
       top functions. Profiling inflates every Python call; read shares, not absolute times.
    """
    url = _redis_db_url(args.redis_url, args.redis_db)
    saver = AsyncRedisSaver(url, prefix=f"bench{token}f")
    admin = redis.Redis.from_url(url)
    subject = Subject(THIS, saver, redis_url=url, prefix=saver.prefix, admin=admin,
                      close_fn=saver.aclose)
    n = 300 if args.quick else 2000
    sizes = replace(QUICK if args.quick else FULL, chat_reps=1)
    perf, cpu = time.perf_counter, time.process_time
    try:
        await setup_micro(subject)
        reader, writer = subject.state["reader"], subject.state["writer"]
        floor = saver.client.register_script("return 1")
        puts = [writer.next() for _ in range(3 * n + 100)]
        put_at = iter(range(len(puts)))

        async def bare() -> None:
            await floor()

        async def get() -> None:
            await saver.aget_tuple(reader.config())

        async def put() -> None:
            a = puts[next(put_at)]
            await saver.aput(a.config, a.checkpoint, a.metadata, a.new_versions)

        ops: list[tuple[str, Callable[[], Awaitable[None]]]] = [
            ("bare EVALSHA `return 1`", bare), ("aget_tuple latest", get), ("aput", put),
        ]
        print(f"# rediskv profile ({'quick' if args.quick else 'full'}, n={n} calls per op)\n")

        # 1. un-profiled
        rows = []
        for label, fn in ops:
            for _ in range(50):
                await fn()
            gc.collect()
            calls0, usec0 = await asyncio.to_thread(_server_usec, admin)
            lat = []
            c0 = cpu()
            for _ in range(n):
                t0 = perf()
                await fn()
                lat.append(perf() - t0)
            used = (cpu() - c0) / n
            calls1, usec1 = await asyncio.to_thread(_server_usec, admin)
            server = (usec1 - usec0) / max(calls1 - calls0, 1) * 1e-6
            clean = "" if calls1 - calls0 == n else f" (other clients: {calls1 - calls0} calls)"
            rows.append([label, fmt_t(percentile(lat, 50)), fmt_t(sum(lat) / n), fmt_t(used),
                         fmt_t(server) + clean])
        print("## Per call, un-profiled\n")
        print(table(["op", "wall p50", "wall mean", "client CPU (process)",
                     "Redis script time (commandstats: EVALSHA, FCALL)"], rows))
        print()
        print(stage_breakdown(saver, reader, puts[-1], n))

        # 2. cProfile, CPU timer
        for label, fn in ops:
            prof = cProfile.Profile()
            prof.enable()
            for _ in range(n):
                await fn()
            prof.disable()
            report_profile(label, prof, n, args.profile_top)
        graph = build_chat_graph(saver)
        prof = cProfile.Profile()
        prof.enable()
        rate, _lat = await chat_loop(subject, graph, sizes, "prof")
        prof.disable()
        turns = sizes.chat_threads * sizes.chat_turns
        report_profile(f"chat turn ({sizes.chat_threads} x {sizes.chat_turns}, "
                       f"{rate:.0f} turns/s under cProfile)", prof, turns, args.profile_top)
    finally:
        await subject.close()


def stage_breakdown(saver: AsyncRedisSaver, reader: ThreadBuilder, put_args: PutArgs,
                    n: int) -> str:
    """Client-side CPU of each stage of aget_tuple and aput, each timed on its own (no I/O).
    Uses the saver's internals (_core, _scripts): a benchmark of this package, not an API."""
    core = saver._core
    serde = core.serde
    conn = saver.client.connection_pool.connection_class()  # (packs as the saver does)
    sha = saver._scripts["get_tuple"].sha

    # aget_tuple: the reply of get_tuple.lua, decoded (sent as a script: the saver may have
    # run its calls as functions of its library, so the script may not be loaded yet). The
    # request names the bases the saver holds of the thread by their marks (as get_tuple
    # does), and the script sends b"" for those: they are read from the saver, as
    # decode_record does with ``held``
    tag = core.keys.tag(reader.thread_id)
    held = {b.ref.encode(): b for b in core.bases.of_namespace(tag, encode_part("")) if b.mark}
    request = next(core.get_tuple(reader.config()))
    with redis.Redis.from_url(saver._url) as client:
        client.script_load(saver._scripts["get_tuple"].script)
        reply = client.evalsha(sha, len(request.keys), *request.keys, *request.args)
    _, _, packed, blob_list, hash_writes, _, large = reply  # (records.lua's load_checkpoint)
    fields = parse_record(packed, large - 1)
    blobs = dict(zip(blob_list[::2], blob_list[1::2], strict=True))
    not_held = [ref for ref, blob in blobs.items() if blob == b"" and ref not in held]
    if not_held:  # (the tool's check: the held bases it knows are those the request named)
        raise RuntimeError(f"get_tuple sent back empty blobs of bases not held: {not_held}")
    blobs = {ref: blob or held[ref].stored for ref, blob in blobs.items()}
    channels: set[bytes] = set()
    values = []  # a channel's first blob is its value, the others bases (as decode_record)
    for ref, blob in blobs.items():
        if ref.split(b":", 1)[0] not in channels:
            channels.add(ref.split(b":", 1)[0])
            values.append(blob)
    writes = [*hash_writes[1::2], *(v for name, v in fields.items() if name.startswith(b"w:"))]
    stored = [fields[b"ck"], fields[b"md"], *values, *writes]

    def load(value: bytes) -> Any:
        # as decode_record does: the mark of a record with values inside, values stored
        # against a base (with the base among the blobs), else the storage serializer
        if value.startswith(INLINE_MARK):
            return core.codec.loads(value[len(INLINE_MARK):])
        if value.startswith(REF_MARK.encode()):
            return core.codec.loads_channel(b"", value, blobs)[0]
        return core.codec.loads(value)

    t_serde_loads = _cpu_per_call(lambda: [load(x) for x in stored], n)
    t_decode = _cpu_per_call(
        lambda: core.codec.decode_record(reader.thread_id, reply, held=held), n)
    t_req_get = _cpu_per_call(lambda: next(core.get_tuple(reader.config())), n)
    t_pack_get = _cpu_per_call(
        lambda: conn.pack_command("EVALSHA", sha, len(request.keys), *request.keys,
                                  *request.args), n)

    # aput: the arguments of put_checkpoint.lua, encoded
    a = put_args
    body = {k: v for k, v in a.checkpoint.items() if k != "channel_values"}
    metadata = get_serializable_checkpoint_metadata(a.config, a.metadata)
    values = [body, metadata, *(a.checkpoint["channel_values"][c] for c in a.new_versions)]
    t_serde_dumps = _cpu_per_call(lambda: [serde.dumps_typed(v) for v in values], n)
    t_req_put = _cpu_per_call(
        lambda: next(core.put(a.config, a.checkpoint, a.metadata, a.new_versions)), n)
    put_req = next(core.put(a.config, a.checkpoint, a.metadata, a.new_versions))
    put_sha = saver._scripts["put_checkpoint"].sha
    t_pack_put = _cpu_per_call(
        lambda: conn.pack_command("EVALSHA", put_sha, len(put_req.keys), *put_req.keys,
                                  *put_req.args), n)
    put_bytes = sum(len(x) for x in conn.pack_command(
        "EVALSHA", put_sha, len(put_req.keys), *put_req.keys, *put_req.args))
    rows = [
        ["aget_tuple", "serde: loads of ck, md, 10 values, 0 writes (decompressed)",
         fmt_t(t_serde_loads)],
        ["aget_tuple", "core: decode_record minus serde", fmt_t(t_decode - t_serde_loads)],
        ["aget_tuple", "core: build the request (keys, args)", fmt_t(t_req_get)],
        ["aget_tuple", "pack_command (EVALSHA; in C: packing.py)", fmt_t(t_pack_get)],
        ["aput", "serde: dumps_typed of body, metadata, 3 new values", fmt_t(t_serde_dumps)],
        ["aput", "core: build the request minus serde (keys, canonical metadata, refs, "
                 "b'type\\0data' copies)", fmt_t(t_req_put - t_serde_dumps)],
        ["aput", f"pack_command (EVALSHA, {len(put_req.args)} args, "
                 f"{put_bytes:,} bytes)", fmt_t(t_pack_put)],
    ]
    return ("## Client CPU per stage, each timed alone (no I/O)\n\n"
            + table(["op", "stage", "CPU per call"], rows) + "\n")


def report_profile(label: str, prof: cProfile.Profile, n: int, top: int) -> None:
    stats = pstats.Stats(prof)
    total = sum(v[2] for v in stats.stats.values())  # type: ignore[attr-defined]
    print(f"## {label}: {fmt_t(total / n)} profiled CPU per call\n")
    print(table(["where", "per call", "share"],
                [[k, fmt_t(v / n), f"{100 * v / total:.0f}%"] for k, v in categorize(stats)]))
    print()
    rows = []
    entries = sorted(stats.stats.items(), key=lambda kv: -kv[1][2])  # type: ignore[attr-defined]
    for (filename, line, func), (_cc, nc, tt, ct, _callers) in entries[:top]:
        where = filename.split("site-packages/")[-1].split("/work/main/")[-1]
        rows.append([f"`{func}` {where}:{line}", f"{nc / n:.1f}", fmt_t(tt / n), fmt_t(ct / n)])
    print(table(["function (top by own time)", "calls/op", "own/op", "cumulative/op"], rows))
    print()


# -- main -----------------------------------------------------------------------------------


def versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    out = {}
    for dist in ("langgraph-checkpoint-rediskv", "langgraph", "langgraph-checkpoint", "redis",
                 "hiredis", "langgraph-checkpoint-postgres", "psycopg",
                 "langgraph-checkpoint-sqlite", "aiosqlite", "langgraph-checkpoint-plainredis"):
        try:
            out[dist] = version(dist)
        except PackageNotFoundError:
            out[dist] = "-"
    return out


async def run(args: argparse.Namespace) -> dict[str, Any]:
    sizes = QUICK if args.quick else FULL
    if args.iterations:
        sizes = replace(sizes, iters=args.iterations)
    token = secrets.token_hex(4)
    started = time.perf_counter()
    subjects, notes = await make_subjects(args, token)
    for note in notes:
        log(f"note: {note}")
    names = [s.name for s in subjects]
    log(f"savers: {', '.join(names)}")
    for s in subjects:
        if s.prefix:
            log(f"  {s.name}: {s.redis_url} prefix {s.prefix}:")
    out: dict[str, Any] = {}
    phase_t = time.perf_counter()

    def lap(name: str) -> None:
        nonlocal phase_t
        now = time.perf_counter()
        log(f"-- {name} done in {now - phase_t:.1f}s")
        phase_t = now

    try:
        micro, trips = await phase_micro(subjects, sizes)
        lap("micro")
        log("memory: bytes per checkpoint")
        memory = await phase_memory(subjects, sizes)
        lap("memory")
        log("chat loop")
        chat = await phase_chat(subjects, sizes)
        lap("chat")
        history = await phase_history(subjects, sizes)
        lap("history scaling")
        threads = await phase_threads(subjects, sizes)
        lap("thread scaling")
        dbsize = {s.name: s.admin.dbsize() for s in subjects if s.admin is not None}
    finally:
        log("cleaning up")
        for s in subjects:
            try:
                await s.close()
            except Exception as exc:  # keep closing the others
                log(f"cleanup of {s.name} failed: {exc!r}")
    elapsed = time.perf_counter() - started
    targets = compute_targets(micro, chat, memory, history, threads, sizes)

    # -- Markdown -----------------------------------------------------------------------
    mode = "quick" if args.quick else "full"
    print(f"# langgraph-checkpoint-rediskv benchmark ({mode} run, {elapsed:.0f} s)\n")
    print(f"Python {platform.python_version()}, {os.cpu_count()} CPUs, load average "
          f"{', '.join(f'{x:.2f}' for x in os.getloadavg())} at the end. "
          f"Cells are p50 / p99 over {sizes.iters} interleaved iterations "
          f"(n=... where a saver hit the {sizes.budget:.1f}s budget of an op).")
    if args.quick:
        print(f"Quick mode: {sizes.history:,} checkpoints of history and {sizes.threads:,} "
              f"threads instead of 10,000; chat loop {sizes.chat_threads} threads x "
              f"{sizes.chat_turns} turns, {sizes.chat_reps} repetition(s).")
    for note in notes:
        print(f"\nNote: {note}.")
    print("\n## Micro ops\n")
    cases = micro_cases()
    print(table(["op", *names],
                [[c.label, *(cell(micro[c.key].get(n)) for n in names)] for c in cases]))
    redis_names = [s.name for s in subjects if s.redis_url is not None]
    if redis_names:
        print("\n## Redis round trips per op (send_packed_command calls, warm)\n")
        rows = [[c.label, *(_trips(trips.get(c.key, {}).get(n)) for n in redis_names)]
                for c in cases]
        rows.append(["chat turn (graph.ainvoke / invoke)",
                     *(_trips(chat[n].round_trips_per_turn) for n in redis_names)])
        print(table(["op", *redis_names], rows))
    if memory:
        print("\n## Redis memory per checkpoint (MEMORY USAGE over the saver's keys)\n")
        print(table(
            ["saver", "checkpoints", "keys", "Redis bytes / checkpoint",
             "serialized payload / checkpoint", "ratio"],
            [[n, m["checkpoints"], m["keys"], f"{m['redis_bytes_per_checkpoint']:,.0f}",
              f"{m['payload_bytes_per_checkpoint']:,.0f}", f"{m['ratio']:.2f}x"]
             for n, m in memory.items()]))
        print("\nBy key kind (bytes per checkpoint): " + "; ".join(
            f"{n}: " + ", ".join(f"{k} {v['bytes_per_checkpoint']:,.0f} ({v['keys']} keys)"
                                 for k, v in m["by_key_kind"].items())
            for n, m in memory.items()) + ".")
    print(f"\n## Chat loop: StateGraph, {sizes.chat_threads} threads x {sizes.chat_turns} turns "
          f"concurrently, x{sizes.chat_reps}\n")
    print(table(["saver", "turns/s (median)", "turns/s per rep", "turn p50", "turn p99",
                 "client CPU / turn", "turns"],
                [[n, _num(median(c.turns_per_s)), ", ".join(_num(x) for x in c.turns_per_s),
                  fmt_t(percentile(c.latencies, 50)), fmt_t(percentile(c.latencies, 99)),
                  fmt_t(median(c.cpu_per_turn)), c.turns]
                 for n, c in chat.items() if c.latencies]))
    print("\n(rediskv-sync: graph.invoke from one worker thread per conversation.)")
    print(f"\n## Scaling with history: one thread of {SMALL_HISTORY} vs {sizes.history:,} "
          f"checkpoints (p50 / p99)\n")
    hops = (
        ("put", "put"), ("get_tuple", "get_tuple latest"), ("list_page", "list page (limit 10)")
    )
    print(table(["op", "saver", f"@ {SMALL_HISTORY}", f"@ {sizes.history:,}", "p50 ratio"],
                scaling_rows(history, subjects, str(SMALL_HISTORY), f"{sizes.history:,}", hops)))
    many = f"{sizes.threads:,} threads"
    print(f"\n## Scaling with threads: 1 vs {many} in the store (p50 / p99; measured one after "
          "the other, not interleaved)\n")
    print(table(["op", "saver", "@ 1 thread", f"@ {many}", "p50 ratio"],
                scaling_rows(threads, subjects, "1 thread", many,
                             (*hops, ("list_all_filter", 'alist(None, filter={"user_id": X}, '
                                                         "limit=10)")))))
    print("\n## Targets (p50, this run)\n")
    print(table(["target", "measured", "goal", "result", "detail"], [t.row() for t in targets]))
    print()

    out = {
        "mode": mode,
        "elapsed_s": round(elapsed, 1),
        "sizes": sizes.__dict__,
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "loadavg_end": os.getloadavg(),
        "versions": versions(),
        "notes": notes,
        "savers": names,
        "micro": {k: {n: st.to_json() for n, st in v.items()} for k, v in micro.items()},
        "round_trips": trips,
        "memory": memory,
        "chat": {n: {"turns_per_s": c.turns_per_s,
                     "cpu_per_turn_us": [round(x * 1e6, 1) for x in c.cpu_per_turn],
                     "p50_us": round(percentile(c.latencies, 50) * 1e6, 1),
                     "p99_us": round(percentile(c.latencies, 99) * 1e6, 1),
                     "turns": c.turns,
                     "round_trips_per_turn": c.round_trips_per_turn}
                 for n, c in chat.items() if c.latencies},
        "history": {k: {n: st.to_json() for n, st in v.items()} for k, v in history.items()},
        "threads": {k: {n: st.to_json() for n, st in v.items()} for k, v in threads.items()},
        "redis_dbsize_at_10k_threads": dbsize,
        "targets": [
            {"target": t.name, "ratio": t.measured, "goal": t.goal,
             "pass": t.ok, "detail": t.detail} for t in targets
        ],
    }
    return out


def _trips(x: float | None) -> str:
    if x is None:
        return "–"
    return f"{x:g}"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="smaller sizes: under a minute")
    parser.add_argument("--json", nargs="?", const="-", metavar="PATH",
                        help="also write the results as JSON to PATH (stdout without PATH)")
    parser.add_argument("--redis-url", default=os.environ.get("BENCH_REDIS_URL",
                                                              "redis://127.0.0.1:6379"))
    parser.add_argument("--redis-db", type=int, default=11,
                        help="first of the 3 database numbers used (default 11: 11, 12, 13)")
    parser.add_argument("--postgres-url", default=os.environ.get(
        "BENCH_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/postgres"),
        help="a database where the run may CREATE DATABASE (it drops what it made)")
    parser.add_argument("--savers", help="comma-separated subset of: rediskv-async, "
                        "rediskv-sync, inmemory, postgres, sqlite, plainredis")
    parser.add_argument("--iterations", type=int, help="timed iterations per micro op")
    parser.add_argument("--base-tree", metavar="PATH",
                        help="also run the AsyncRedisSaver of the checkout at PATH, as "
                        "rediskv-async@base, in the same interleaved run")
    parser.add_argument("--profile", action="store_true",
                        help="instead: cProfile this saver's aget_tuple, aput and chat loop")
    parser.add_argument("--profile-top", type=int, default=15)
    args = parser.parse_args(argv)
    if args.profile:
        asyncio.run(profile_run(args, secrets.token_hex(4)))
        return 0
    if args.json == "-":
        real_stdout = sys.stdout
        sys.stdout = sys.stderr  # the tables go to stderr, the JSON alone to stdout
        try:
            out = asyncio.run(run(args))
        finally:
            sys.stdout = real_stdout
        json.dump(out, sys.stdout, indent=2, default=str)
        print()
        return 0
    out = asyncio.run(run(args))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=2, default=str)
        log(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
