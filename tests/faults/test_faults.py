"""Faults on a server the test owns: killed connections, a crash and restart with AOF, SCRIPT
FLUSH mid-run, and a server that stops answering. After each, every acknowledged checkpoint
reads back complete and the invariant checker finds nothing."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
import redis
from langgraph.checkpoint.base import CheckpointTuple

from langgraph.checkpoint.rediskv import AsyncRedisSaver, RedisSaver, RedisUnavailableError

from ..conftest import PrivateServer, new_prefix
from ..integration.test_contract import cfg
from ..integration.test_ttl import build_chat, expected_messages, turn


def record_acknowledged(saver: RedisSaver) -> list[dict[str, Any]]:
    """Wrap saver.put so every config it returned (an acknowledged checkpoint) is kept."""
    acknowledged: list[dict[str, Any]] = []
    put = saver.put

    def recording_put(*args: Any, **kwargs: Any) -> Any:
        config = put(*args, **kwargs)
        acknowledged.append(config)
        return config

    saver.put = recording_put  # type: ignore[method-assign]
    return acknowledged


def finish_turn(graph: Any, thread_id: str, text: str) -> None:
    """What a caller does after a failed turn: resume it when its input was stored, else send
    the input again."""
    config = {"configurable": {"thread_id": thread_id}}
    for _ in range(5):
        try:
            state = graph.get_state(config)
            # the input was stored: as the latest checkpoint (not yet run), or already applied
            input_pending = (state.metadata or {}).get("source") == "input"
            stored = input_pending or text in state.values.get("messages", [])
            graph.invoke(None if stored else {"messages": [text]}, config)
            return
        except RedisUnavailableError:
            continue
    raise AssertionError(f"could not finish the turn {text!r}")


def assert_all_complete(saver: RedisSaver, acknowledged: list[dict[str, Any]]) -> None:
    for config in acknowledged:
        tup = saver.get_tuple(config)
        assert isinstance(tup, CheckpointTuple), config
        assert tup.checkpoint["id"] == config["configurable"]["checkpoint_id"]
    assert saver.check_invariants() == []


def test_killed_connections_during_a_200_turn_run(private_server: PrivateServer) -> None:
    admin = redis.Redis(port=private_server.port)
    stop = threading.Event()
    kills = 0

    def killer() -> None:
        nonlocal kills
        while not stop.is_set():
            kills += admin.client_kill_filter(_type="normal", skipme=True)
            time.sleep(0.02)

    with RedisSaver(private_server.url, prefix=new_prefix(), retries=5) as saver:
        acknowledged = record_acknowledged(saver)
        graph = build_chat(saver)
        thread = threading.Thread(target=killer)
        thread.start()
        failures: list[Exception] = []
        try:
            for i in range(200):
                try:
                    turn(graph, "chat", f"user {i}")
                except RedisUnavailableError as exc:
                    # retries ran out: the call failed with a clear error; the user retries
                    failures.append(exc)
                    finish_turn(graph, "chat", f"user {i}")
        finally:
            stop.set()
            thread.join()
        print(
            f"\n{kills} connections killed during 200 turns on {private_server.kind}; "
            f"{len(failures)} calls failed after their retries and were retried by the caller"
        )
        assert kills >= 20
        assert all("cannot reach Redis at" in str(f) for f in failures)
        state = graph.get_state({"configurable": {"thread_id": "chat"}})
        assert state.values == {"profile": "likes tea", "messages": expected_messages(200)}
        assert len(acknowledged) >= 3 * 200
        for config in acknowledged:
            tup = saver.get_tuple(config)
            assert isinstance(tup, CheckpointTuple), config
        problems = saver.check_invariants()
        # graph.invoke stores checkpoints in the background (durability "async"): the
        # writes of a step can be stored while the put of its checkpoint is the call that
        # failed, and a put that failed fails the puts chained after it (langgraph's
        # _checkpointer_put_after_previous) while their steps' tasks may store writes too.
        # Those writes belong to no checkpoint (the checker reports them; prune and delete
        # remove them); only writes of checkpoints never acknowledged, and only after a
        # failure, may be there. (One failure left two such checkpoints in a run.)
        stored = {c["configurable"]["checkpoint_id"] for c in acknowledged}
        orphans = [p for p in problems if p.problem == "writes without checkpoint"]
        assert [p for p in problems if p not in orphans] == []
        assert failures or not orphans
        assert not any(p.key.rsplit(":", 1)[1] in stored for p in orphans)
    admin.close()


def test_crash_and_restart_with_aof_loses_nothing_acknowledged(tmp_path: Any) -> None:
    server = PrivateServer(tmp_path, appendonly="yes", appendfsync="always").start()
    try:
        with RedisSaver(server.url, prefix=new_prefix(), connect_timeout=0.5, retries=1) as saver:
            acknowledged = record_acknowledged(saver)
            graph = build_chat(saver)
            for i in range(20):
                turn(graph, "chat", f"user {i}")
            server.kill()
            with pytest.raises(
                RedisUnavailableError, match=r"cannot reach Redis at redis://127\.0\.0\.1"
            ):
                saver.get_tuple(cfg("chat"))
            server.start()  # same port, same directory: the AOF is replayed
            for i in range(20, 30):  # the same saver and graph go on
                turn(graph, "chat", f"user {i}")
            state = graph.get_state({"configurable": {"thread_id": "chat"}})
            assert state.values == {"profile": "likes tea", "messages": expected_messages(30)}
            assert_all_complete(saver, acknowledged)
            assert len(acknowledged) == 90
    finally:
        server.stop()


def test_script_flush_mid_run_changes_nothing(private_server: PrivateServer) -> None:
    admin = redis.Redis(port=private_server.port)
    with RedisSaver(private_server.url, prefix=new_prefix()) as saver:
        graph = build_chat(saver)
        for i in range(30):
            if i % 5 == 0:
                admin.script_flush()
            turn(graph, "chat", f"user {i}")
        state = graph.get_state({"configurable": {"thread_id": "chat"}})
        assert state.values == {"profile": "likes tea", "messages": expected_messages(30)}
        assert saver.check_invariants() == []
    admin.close()


def test_a_server_that_stops_answering_fails_the_call_instead_of_hanging(
    private_server: PrivateServer,
) -> None:
    with RedisSaver(
        private_server.url, prefix=new_prefix(), socket_timeout=0.5, retries=0
    ) as saver:
        saver.get_tuple(cfg("t"))  # connected and scripts loaded
        private_server.pause()
        outcome: list[BaseException | None] = []

        def call() -> None:
            try:
                saver.get_tuple(cfg("t"))
                outcome.append(None)
            except BaseException as exc:
                outcome.append(exc)

        caller = threading.Thread(target=call)
        caller.start()
        caller.join(timeout=20)  # a generous bound: the point is that it returns at all
        private_server.resume()
    assert not caller.is_alive()
    assert len(outcome) == 1 and isinstance(outcome[0], RedisUnavailableError)
    assert "Timeout" in str(outcome[0])


async def test_async_saver_survives_killed_connections(private_server: PrivateServer) -> None:
    admin = redis.Redis(port=private_server.port)
    async with AsyncRedisSaver(private_server.url, prefix=new_prefix(), retries=5) as saver:
        graph = build_chat(saver)
        for i in range(40):
            if i % 4 == 0:
                admin.client_kill_filter(_type="normal", skipme=True)
            await graph.ainvoke(
                {"messages": [f"user {i}"]}, {"configurable": {"thread_id": "chat"}}
            )
        state = await graph.aget_state({"configurable": {"thread_id": "chat"}})
        assert state.values == {"profile": "likes tea", "messages": expected_messages(40)}
        assert await saver.acheck_invariants() == []
    admin.close()


@pytest.fixture
def not_redis() -> Any:
    """A port on which a web server answers instead of Redis."""
    import socket

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    stop = threading.Event()

    def serve() -> None:
        listener.settimeout(0.2)
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except OSError:
                continue
            with conn:
                conn.recv(4096)
                conn.sendall(b"HTTP/1.1 400 Bad Request\r\n\r\n<html>no</html>\r\n")

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield f"redis://:secret@127.0.0.1:{listener.getsockname()[1]}/0"
    stop.set()
    thread.join()
    listener.close()


def test_a_port_that_is_not_redis_is_named_in_the_error(not_redis: str) -> None:
    with RedisSaver(not_redis, retries=0) as saver, pytest.raises(RedisUnavailableError) as err:
        saver.get_tuple(cfg("t"))
    port = not_redis.rsplit(":", 1)[1].split("/")[0]
    assert str(err.value).startswith(
        f"the server at redis://:***@127.0.0.1:{port}/0 does not answer in the Redis protocol"
    )
    assert "secret" not in str(err.value)


async def test_a_port_that_is_not_redis_is_named_in_the_error_async(not_redis: str) -> None:
    async with AsyncRedisSaver(not_redis, retries=0) as saver:
        with pytest.raises(RedisUnavailableError, match="does not answer in the Redis protocol"):
            await saver.aget_tuple(cfg("t"))


async def test_a_sync_call_on_the_saver_loop_is_refused_without_a_stray_coroutine(
    server_url: str,
) -> None:
    import asyncio
    import gc
    import warnings

    async with AsyncRedisSaver(server_url, prefix=new_prefix()) as saver:
        await saver.aget_tuple(cfg("t"))  # the saver's loop is this one now
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            with pytest.raises(asyncio.InvalidStateError, match="only allowed from a thread"):
                saver.get_tuple(cfg("t"))
            gc.collect()
        assert [str(w.message) for w in caught if "never awaited" in str(w.message)] == []
