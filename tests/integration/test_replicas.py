"""Replicas and failover (issue 27): what a promotion loses, and ``wait_for_replicas``.

A private primary and a replica of it (``--replicaof``); a failover is the replica promoted
(``REPLICAOF NO ONE``) once the primary is gone.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

from langgraph.checkpoint.rediskv import (
    AsyncRedisSaver,
    RedisSaver,
    RedisUnavailableError,
    ReplicationError,
)

from ..conftest import PrivateServer, new_prefix
from .test_contract import cfg, chain, make_checkpoint


def _wait_for(condition: Any, what: str, timeout: float = 20) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out waiting for {what}")
        time.sleep(0.05)


class Pair:
    """A primary and its replica, both private."""

    def __init__(self, directory: Path) -> None:
        (directory / "primary").mkdir()
        (directory / "replica").mkdir()
        self.primary = PrivateServer(directory / "primary").start()
        self.replica = PrivateServer(
            directory / "replica", replicaof=f"127.0.0.1 {self.primary.port}"
        ).start()
        self.admin = redis.Redis(port=self.replica.port)
        _wait_for(self.linked, "the replica's link")

    def linked(self) -> bool:
        return self.admin.info("replication").get("master_link_status") == "up"

    def caught_up(self) -> bool:
        with redis.Redis(port=self.primary.port) as primary:
            offset = primary.info("replication")["master_repl_offset"]
        return bool(self.admin.info("replication")["slave_repl_offset"] == offset)

    def detach_replica(self) -> None:
        """The replica stops following the primary (a partition, or a promotion that has
        begun): the primary's writes from now on never reach it."""
        self.admin.execute_command("REPLICAOF", "NO", "ONE")

    def fail_over(self) -> None:
        """The primary dies; its replica is promoted."""
        self.primary.kill()
        self.admin.execute_command("REPLICAOF", "NO", "ONE")

    def close(self) -> None:
        self.admin.close()
        self.replica.stop()
        self.primary.stop()


@pytest.fixture
def pair(tmp_path: Path) -> Iterator[Pair]:
    servers = Pair(tmp_path)
    yield servers
    servers.close()


@pytest.mark.parametrize(
    ("options", "problem"),
    [
        ({"wait_for_replicas": -1}, "wait_for_replicas must be a number of replicas"),
        ({"wait_for_replicas": True}, "wait_for_replicas must be a number of replicas"),
        ({"wait_for_replicas": 1.5}, "wait_for_replicas must be a number of replicas"),
        ({"wait_for_replicas": 1, "wait_timeout": 0}, "wait_timeout must be a number"),
        ({"wait_for_replicas": 1, "wait_timeout": -1}, "wait_timeout must be a number"),
        ({"wait_for_replicas": 1, "wait_timeout": float("inf")}, "wait_timeout must be"),
        ({"wait_for_replicas": 1, "wait_timeout": "1"}, "wait_timeout must be a number"),
        (
            {"wait_for_replicas": 1, "wait_timeout": 5, "socket_timeout": 2},
            "wait_timeout (5 s) must be shorter than socket_timeout (2 s)",
        ),
    ],
)
@pytest.mark.parametrize("saver_class", [RedisSaver, AsyncRedisSaver])
def test_bad_wait_settings_are_a_clear_value_error(
    saver_class: Any, options: dict[str, Any], problem: str
) -> None:
    with pytest.raises(ValueError) as raised:
        saver_class("redis://127.0.0.1:1/0", **options)
    assert problem in str(raised.value)


def test_the_replication_error_is_an_unavailable_error() -> None:
    """Retry code that catches a connection error retries it (every write is idempotent)."""
    assert issubclass(ReplicationError, RedisUnavailableError)
    assert issubclass(ReplicationError, redis.exceptions.ConnectionError)


def test_a_failover_loses_what_the_replica_had_not_received_and_stays_consistent(
    pair: Pair,
) -> None:
    """Without the option a put is acknowledged once the primary has it: the put made after
    the replica stopped following is acknowledged, and the promoted replica does not have
    it. The store it keeps is consistent: the thread as of the checkpoint before."""
    prefix = new_prefix()
    with RedisSaver(pair.primary.url, prefix=prefix) as saver:
        first = chain(saver, "t", [{"run_id": "r1", "step": 0}, {"run_id": "r1", "step": 1}])
        _wait_for(pair.caught_up, "the replica to catch up")
        pair.detach_replica()
        late = chain(saver, "t", [{"run_id": "r2", "step": 2}])  # acknowledged
        saver.put_writes(cfg("t", "", late[0]), [("x", 1)], "task")
    pair.fail_over()
    with RedisSaver(pair.replica.url, prefix=prefix) as promoted:
        newest = promoted.get_tuple(cfg("t"))
        assert newest is not None
        assert newest.checkpoint["id"] == first[1]  # the acknowledged put is lost
        assert [t.checkpoint["id"] for t in promoted.list(cfg("t"))] == first[::-1]
        assert [t.config["configurable"]["thread_id"] for t in promoted.list(
            None, filter={"run_id": "r2"})] == []  # fmt: skip
        assert promoted.check_invariants() == []


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_with_wait_for_replicas_an_acknowledged_put_survives_the_failover(
    pair: Pair, mode: str
) -> None:
    """wait_for_replicas=1: each write returns once the replica holds it, so whatever was
    acknowledged is on the promoted replica (a put, its writes, a delete, a copy)."""
    prefix = new_prefix()
    options = {"prefix": prefix, "wait_for_replicas": 1, "wait_timeout": 2}
    if mode == "sync":
        with RedisSaver(pair.primary.url, **options) as saver:
            ids = chain(saver, "t", [{"run_id": "r1", "step": s} for s in range(3)])
            saver.put_writes(cfg("t", "", ids[-1]), [("x", 1)], "task")
            chain(saver, "gone", [{"run_id": "r9"}])
            saver.copy_thread("t", "copy")
            saver.delete_thread("gone")
    else:

        async def scenario() -> list[str]:
            async with AsyncRedisSaver(pair.primary.url, **options) as saver:
                ids = []
                for step in range(3):
                    config = cfg("t", "", ids[-1] if ids else None)
                    version = str(step + 1)
                    checkpoint = make_checkpoint({"n": step}, {"n": version})
                    await saver.aput(config, checkpoint, {"run_id": "r1"}, {"n": version})
                    ids.append(checkpoint["id"])
                await saver.aput_writes(cfg("t", "", ids[-1]), [("x", 1)], "task")
                gone = make_checkpoint({"n": 0}, {"n": "1"})
                await saver.aput(cfg("gone"), gone, {"run_id": "r9"}, {"n": "1"})
                await saver.acopy_thread("t", "copy")
                await saver.adelete_thread("gone")
                return ids

        ids = asyncio.run(scenario())
    pair.fail_over()  # (at once: no time for replication to catch up)
    with RedisSaver(pair.replica.url, prefix=prefix) as promoted:
        newest = promoted.get_tuple(cfg("t"))
        assert newest is not None
        assert newest.checkpoint["id"] == ids[-1]
        assert newest.pending_writes == [("task", "x", 1)]
        copied = promoted.get_tuple(cfg("copy"))
        assert copied is not None and copied.checkpoint["id"] == ids[-1]
        assert promoted.get_tuple(cfg("gone")) is None
        assert promoted.check_invariants() == []


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_write_no_replica_acknowledges_raises_replication_error(pair: Pair, mode: str) -> None:
    """The replica stopped following: the put happens on the primary (it reads back), but
    WAIT counts no replica within the timeout, and the saver says so."""
    prefix = new_prefix()
    pair.detach_replica()
    options = {"prefix": prefix, "wait_for_replicas": 1, "wait_timeout": 0.05}

    checkpoint = make_checkpoint({"n": 1}, {"n": "1"})
    started = time.monotonic()
    with pytest.raises(ReplicationError) as raised:
        if mode == "sync":
            with RedisSaver(pair.primary.url, **options) as saver:
                saver.put(cfg("t"), checkpoint, {}, {"n": "1"})
        else:

            async def put() -> None:
                async with AsyncRedisSaver(pair.primary.url, **options) as saver:
                    await saver.aput(cfg("t"), checkpoint, {}, {"n": "1"})

            asyncio.run(put())
    assert time.monotonic() - started < 2
    assert str(raised.value) == (
        "put_checkpoint: only 0 of the 1 replicas asked for (wait_for_replicas) acknowledged "
        "the write within 50 ms. The write happened on the primary and may be read back, but "
        "a failover now may lose it; retrying the call is safe"
    )
    with RedisSaver(pair.primary.url, prefix=prefix) as reader:
        stored = reader.get_tuple(cfg("t"))
        assert stored is not None and stored.checkpoint["id"] == checkpoint["id"]


def test_with_wait_for_replicas_a_flushed_script_is_loaded_again(pair: Pair) -> None:
    """The waited pipeline loads its scripts once; after a SCRIPT FLUSH (a restart) the
    call that met NOSCRIPT goes again, with its WAIT."""
    prefix = new_prefix()
    with RedisSaver(pair.primary.url, prefix=prefix, wait_for_replicas=1, wait_timeout=2) as saver:
        first = chain(saver, "t", [{"step": 0}])
        with redis.Redis(port=pair.primary.port) as primary:
            primary.script_flush()
        second = chain(saver, "t", [{"step": 1}])
        listed = [t.checkpoint["id"] for t in saver.list(cfg("t"))]
    assert listed == second + first
