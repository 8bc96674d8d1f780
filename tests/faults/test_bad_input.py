"""Bad input gets an error that names the problem, and a failed call changes nothing stored."""

from __future__ import annotations

import re
import socket
import threading
from datetime import timedelta
from typing import Any

import pytest
import redis

from langgraph.checkpoint.rediskv import (
    AsyncRedisSaver,
    RedisSaver,
    RedisUnavailableError,
    SerializationError,
)

from ..conftest import snapshot
from ..integration.test_contract import cfg, chain, make_checkpoint


@pytest.fixture
def stored(saver: RedisSaver, client: redis.Redis) -> dict[bytes, Any]:
    """A thread with two checkpoints and a write; returns the snapshot to compare with."""
    ids = chain(saver, "t", [{"step": 0}, {"step": 1}])
    saver.put_writes(cfg("t", checkpoint_id=ids[-1]), [("n", 1)], "task")
    return snapshot(client, f"{saver.prefix}:*")


@pytest.mark.parametrize(
    "call",
    [
        lambda s: s.get_tuple({"configurable": {}}),
        lambda s: s.get_tuple({}),
        lambda s: list(s.list({"configurable": {"checkpoint_ns": ""}})),
        lambda s: s.put({"configurable": {}}, make_checkpoint({}, {}), {}, {}),
        lambda s: s.put_writes({"configurable": {"checkpoint_id": "x"}}, [("a", 1)], "task"),
    ],
    ids=["get_tuple", "get_tuple-no-configurable", "list", "put", "put_writes"],
)
def test_missing_thread_id_is_named(
    saver: RedisSaver, client: redis.Redis, stored: dict[bytes, Any], call: Any
) -> None:
    with pytest.raises(ValueError, match='config has no "thread_id"'):
        call(saver)
    assert snapshot(client, f"{saver.prefix}:*") == stored


def test_unknown_prune_strategy_is_named_and_changes_nothing(
    saver: RedisSaver, client: redis.Redis, stored: dict[bytes, Any]
) -> None:
    with pytest.raises(ValueError, match="unknown prune strategy 'keep_oldest'"):
        saver.prune(["t"], strategy="keep_oldest")
    assert snapshot(client, f"{saver.prefix}:*") == stored


def test_unserializable_channel_value_is_named_and_changes_nothing(
    saver: RedisSaver, client: redis.Redis, stored: dict[bytes, Any]
) -> None:
    latest = saver.get_tuple(cfg("t"))
    assert latest is not None
    version = saver.get_next_version(latest.checkpoint["channel_versions"]["n"], None)
    bad = make_checkpoint({"n": 2, "lock": threading.Lock()}, {"n": version, "lock": version})
    with pytest.raises(SerializationError, match="cannot serialize channel 'lock'"):
        saver.put(latest.config, bad, {"step": 2}, {"n": version, "lock": version})
    with pytest.raises(SerializationError, match="cannot serialize the write to channel 'x'"):
        saver.put_writes(latest.config, [("n", 5), ("x", object())], "task-2")
    assert snapshot(client, f"{saver.prefix}:*") == stored


@pytest.mark.parametrize("prefix_", ["", "a:b", "with space", "glob*", "{tag}"])
def test_invalid_prefix_is_refused_at_construction(prefix_: str) -> None:
    with pytest.raises(ValueError, match=re.escape(f"invalid key prefix {prefix_!r}")):
        RedisSaver("redis://127.0.0.1:1/0", prefix=prefix_)


@pytest.mark.parametrize(
    ("ttl", "message"),
    [
        ({"default_ttl": -5}, "default_ttl must be positive"),
        ({"default_ttl": 0}, "default_ttl must be positive"),
        ({"default_ttl": "10"}, "default_ttl must be minutes"),
        ({"default_ttl": 1, "refresh_on_read": "yes"}, "refresh_on_read must be True or False"),
        ({"default_tll": 1}, r"unknown key\(s\) \['default_tll'\]"),
        (30, "expected None, a timedelta, or a dict"),
        (timedelta(seconds=-1), "default_ttl must be positive"),
    ],
)
def test_invalid_ttl_is_refused_at_construction(ttl: Any, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        AsyncRedisSaver("redis://127.0.0.1:1/0", ttl=ttl)


def test_unsupported_url_scheme_is_named() -> None:
    with pytest.raises(ValueError, match=r"unsupported Redis URL 'http://user:\*\*\*@h:1'"):
        RedisSaver("http://user:secret@h:1")


def _unused_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_unreachable_server_is_named() -> None:
    url = f"redis://:hunter2@127.0.0.1:{_unused_port()}/0"
    with (
        RedisSaver(url, connect_timeout=1) as saver,
        pytest.raises(
            RedisUnavailableError, match=r"cannot reach Redis at redis://:\*\*\*@127\.0\.0\.1"
        ) as info,
    ):
        saver.get_tuple(cfg("t"))
    assert "hunter2" not in str(info.value)
    assert isinstance(info.value, redis.exceptions.ConnectionError)


async def test_unreachable_server_is_named_async() -> None:
    port = _unused_port()
    async with AsyncRedisSaver(f"redis://127.0.0.1:{port}/0", connect_timeout=1) as saver:
        with pytest.raises(
            RedisUnavailableError, match=f"cannot reach Redis at redis://127.0.0.1:{port}/0"
        ):
            await saver.aput(cfg("t"), make_checkpoint({}, {}), {}, {})


NOT_A_CLUSTER = (
    "cluster=True, but the server at {url} is not a Redis Cluster (cluster mode is not "
    "enabled there): leave cluster out for a standalone server"
)


async def test_cluster_true_against_a_standalone_server_is_named(server_url: str) -> None:
    """redis-py said "Redis Cluster cannot be connected. Please provide at least one
    reachable node: Cluster mode is not enabled on this node" (the sync saver at
    construction; the async one at its first call, as RedisUnavailableError: retryable)."""
    expected = re.escape(NOT_A_CLUSTER.format(url=server_url))
    with pytest.raises(ValueError, match=expected):
        RedisSaver(server_url, cluster=True, prefix="never")
    saver = AsyncRedisSaver(server_url, cluster=True, prefix="never")
    with pytest.raises(ValueError, match=expected):
        await saver.aget_tuple(cfg("t"))
    await saver.aclose()


DECODING = (
    "the Redis client decodes replies into text (decode_responses=True), but checkpoints are "
    "stored as bytes: give the saver a client, or a URL and options, without decode_responses"
)


async def test_a_client_that_decodes_replies_is_refused_at_construction(
    server_url: str, client: redis.Redis
) -> None:
    """Before, the put was stored and every read failed with a UnicodeDecodeError."""
    prefix = "decoding-refused"
    with pytest.raises(ValueError, match=re.escape(DECODING)):
        RedisSaver(server_url, prefix=prefix, decode_responses=True)
    with pytest.raises(ValueError, match=re.escape(DECODING)):
        AsyncRedisSaver(f"{server_url}?decode_responses=True", prefix=prefix)
    own = redis.Redis.from_url(server_url, decode_responses=True)
    with pytest.raises(ValueError, match=re.escape(DECODING)):
        RedisSaver(client=own, prefix=prefix)
    own.close()
    assert list(client.scan_iter(match=f"{prefix}:*")) == []
