"""A thread the server evicted whole (every key under its hash tag) is an error, not a new
thread: the registry of live threads (P:alive, lua/thread_deadlines.lua) says it is due. A new
thread, one without a ttl, one that expired, one this saver deleted, emptied by
delete_for_runs or gave a shorter ttl, and one that release 0.1.0 deleted, read as new."""

from __future__ import annotations

import time
from datetime import timedelta
from typing import Any

import pytest
import redis

from langgraph.checkpoint.rediskv import AsyncRedisSaver, RedisSaver
from langgraph.checkpoint.rediskv.errors import CheckpointLostError, ThreadLostError
from langgraph.checkpoint.rediskv.keys import KeySchema

from ..clock import advance_time
from ..conftest import RoundTrips
from ..integration.test_contract import cfg, chain, listed_ids

HOUR = {"default_ttl": 60}


def evict_whole(client: redis.Redis, keys: KeySchema, thread: str) -> int:
    """Unlink every key of the thread, as an eviction that took them all does."""
    thread_keys = list(client.scan_iter(match=keys.thread_keys_pattern(thread)))
    assert thread_keys
    return int(client.unlink(*thread_keys))


def registry(client: redis.Redis, keys: KeySchema) -> dict[str, int]:
    return {
        tag.decode(): int(score)
        for tag, score in client.zrange(keys.live_threads(), 0, -1, withscores=True)
    }


def server_now(client: redis.Redis) -> int:
    return int(client.time()[0])


def test_a_thread_evicted_whole_raises_thread_lost_on_every_read(
    server_url: str, prefix: str, client: redis.Redis
) -> None:
    with RedisSaver(server_url, prefix=prefix, ttl=HOUR) as saver:
        keys = KeySchema(prefix)
        tag = keys.tag("t")
        before = server_now(client)
        chain(saver, "t", [{"step": i} for i in range(3)])
        deadline = registry(client, keys)[tag]
        assert before + 3600 <= deadline <= server_now(client) + 3600
        evict_whole(client, keys, "t")
        reads: list[Any] = [
            lambda: saver.get_tuple(cfg("t")),
            lambda: list(saver.list(cfg("t"))),
            lambda: list(saver.list({"configurable": {"thread_id": "t"}})),
            lambda: list(saver.list(cfg("t"), filter={"step": 1}, limit=1)),
        ]
        for read in reads:
            with pytest.raises(ThreadLostError) as lost:
                read()
            assert (lost.value.thread_id, lost.value.what, lost.value.key) == (
                "t",
                "thread",
                keys.thread(tag),
            )
            assert lost.value.deadline == deadline
            assert isinstance(lost.value, CheckpointLostError)
            assert "maxmemory-policy" in str(lost.value) and "'t'" in str(lost.value)
        # the app deletes it: it is forgotten (held a minute: a note of a put that raced the
        # delete is refused), and a new conversation starts on the id
        saver.delete_thread("t")
        now = server_now(client)
        hold = registry(client, keys)[tag]
        assert -(now + 60) <= hold < -now
        assert saver.get_tuple(cfg("t")) is None
        new_ids = chain(saver, "t", [{"step": 0}])
        assert listed_ids(saver, cfg("t")) == new_ids
        assert registry(client, keys) == {tag: hold}  # (its note came within the hold)
        advance_time(client, prefix, 61)  # (the hold passes; the thread's keys live on)
        chain(saver, "t", [{"step": 1}])
        assert registry(client, keys)[tag] > server_now(client) + 3500


def test_on_a_standalone_server_the_read_itself_asks_the_registry(
    server_url: str, prefix: str, client: redis.Redis, round_trips: RoundTrips
) -> None:
    """get_tuple.lua and list_checkpoints.lua ask the registry in the same call (standalone:
    a script may touch a key outside the thread's slot), so telling a thread evicted whole
    from a new one costs no round trip, where the client asked, then read again (3)."""
    keys = KeySchema(prefix)
    with RedisSaver(server_url, prefix=prefix, ttl=HOUR) as saver:
        chain(saver, "t", [{"step": 0}])
        deadline = registry(client, keys)[keys.tag("t")]
        evict_whole(client, keys, "t")
        for read in (lambda: saver.get_tuple(cfg("t")), lambda: list(saver.list(cfg("t")))):
            round_trips.reset()
            with pytest.raises(ThreadLostError) as lost:
                read()
            assert round_trips.count == 1
            assert (lost.value.key, lost.value.deadline) == (keys.thread(keys.tag("t")), deadline)
        round_trips.reset()
        assert saver.get_tuple(cfg("never")) is None
        assert list(saver.list(cfg("never"))) == []
        assert round_trips.count == 2


async def test_the_async_saver_raises_thread_lost_too(
    server_url: str, prefix: str, client: redis.Redis
) -> None:
    async with AsyncRedisSaver(server_url, prefix=prefix, ttl=HOUR) as saver:
        keys = KeySchema(prefix)
        with RedisSaver(server_url, prefix=prefix, ttl=HOUR) as sync_saver:
            chain(sync_saver, "t", [{"step": 0}])
        evict_whole(client, keys, "t")
        with pytest.raises(ThreadLostError):
            await saver.aget_tuple(cfg("t"))
        with pytest.raises(ThreadLostError):
            _ = [t async for t in saver.alist(cfg("t"))]
        await saver.adelete_thread("t")
        assert await saver.aget_tuple(cfg("t")) is None


def test_threads_that_were_never_due_read_as_new(
    saver: RedisSaver, server_url: str, prefix: str, client: redis.Redis
) -> None:
    keys = KeySchema(prefix)
    assert saver.get_tuple(cfg("never")) is None  # (a new chat: the registry does not hold it)
    assert listed_ids(saver, cfg("never")) == []
    chain(saver, "no-ttl", [{"step": 0}])  # (no ttl: volatile-* never evicts its keys)
    with RedisSaver(server_url, prefix=prefix, ttl=HOUR) as with_ttl:
        chain(with_ttl, "sub", [{"step": 0}], ns="child")  # (a subgraph's put notes nothing)
    assert registry(client, keys) == {}
    for thread in ("no-ttl", "sub"):
        evict_whole(client, keys, thread)
        assert saver.get_tuple(cfg(thread)) is None
        assert listed_ids(saver, cfg(thread)) == []


def test_a_thread_that_expired_reads_as_new_and_leaves_the_registry(
    server_url: str, prefix: str, client: redis.Redis
) -> None:
    keys = KeySchema(prefix)
    with RedisSaver(server_url, prefix=prefix, ttl=HOUR) as saver:
        chain(saver, "t", [{"step": 0}])
        assert list(registry(client, keys)) == [keys.tag("t")]
        advance_time(client, prefix, 3601)  # (every key of the thread expired)
        assert client.exists(keys.thread(keys.tag("t"))) == 0
        assert saver.get_tuple(cfg("t")) is None
        assert registry(client, keys) == {}  # (the read removed the passed entry)


def test_a_put_sweeps_passed_deadlines_from_the_registry(
    server_url: str, prefix: str, client: redis.Redis
) -> None:
    keys = KeySchema(prefix)
    now = server_now(client)
    passed = {f"{{old{i}}}": now - 10 for i in range(20)}
    client.zadd(keys.live_threads(), passed)
    with RedisSaver(server_url, prefix=prefix, ttl=HOUR) as saver:
        chain(saver, "t", [{"step": 0}])
    left = registry(client, keys)
    assert len(left) == 1 + 20 - 16  # (a note sweeps 16 at most: bounded work)
    assert keys.tag("t") in left


def test_a_thread_is_noted_once_per_sixteenth_of_its_ttl(
    server_url: str, prefix: str, client: redis.Redis
) -> None:
    keys = KeySchema(prefix)
    tag = keys.tag("t")
    with RedisSaver(server_url, prefix=prefix, ttl=HOUR) as saver:
        chain(saver, "t", [{"step": 0}])
        first = registry(client, keys)[tag]
        client.zadd(keys.live_threads(), {tag: 1})  # (so that a second note would show)
        chain(saver, "t", [{"step": i} for i in range(1, 5)])
        assert registry(client, keys)[tag] == 1  # (not noted again: its deadline barely grew)
        noted = saver._core.noted_deadlines
        noted.noted(tag, first - 3600 // 16)  # (as if noted 225 s ago)
        chain(saver, "t", [{"step": 9}])
        assert registry(client, keys)[tag] >= first


def test_operations_that_empty_a_thread_or_shorten_its_ttl_leave_it_new(
    server_url: str, prefix: str, client: redis.Redis
) -> None:
    keys = KeySchema(prefix)
    with RedisSaver(server_url, prefix=prefix, ttl=HOUR) as saver:
        chain(saver, "runs", [{"run_id": "r1", "step": i} for i in range(2)])
        chain(saver, "short", [{"step": 0}])
        chain(saver, "kept", [{"step": 0}])
        assert set(registry(client, keys)) == {keys.tag(t) for t in ("runs", "short", "kept")}
        saver.delete_for_runs(["r1"])  # (every checkpoint of the thread goes)
        assert client.exists(keys.thread(keys.tag("runs"))) == 0
        # (its graph's ledger stays while it expires, so it reads as new; it stays in the
        # registry, as do the threads delete_for_runs leaves)
        assert client.pttl(keys.ledger(keys.tag("runs"), "")) > 3500_000
        assert saver.get_tuple(cfg("runs")) is None
        assert listed_ids(saver, cfg("runs")) == []
        saver.set_thread_ttl("short", timedelta(seconds=1))
        time.sleep(2.2)  # (real time: the thread's own ttl of 1 s runs out)
        assert saver.get_tuple(cfg("short")) is None
        due = [t for t, d in registry(client, keys).items() if d > 0]
        assert sorted(due) == [keys.tag("kept"), keys.tag("runs")]
        saver.prune(["kept"], strategy="delete_all")
        assert [t for t, d in registry(client, keys).items() if d > 0] == [keys.tag("runs")]


def test_a_thread_deleted_by_a_writer_that_knows_no_registry_reads_as_deleted(
    server_url: str, prefix: str, client: redis.Redis
) -> None:
    """Release 0.1.0's delete removes every key it knows: the ledger of the graph's namespace
    stays, as long as the deadline noted, so the thread reads as deleted, not lost."""
    keys = KeySchema(prefix)
    tag = keys.tag("t")
    with RedisSaver(server_url, prefix=prefix, ttl=HOUR) as saver:
        chain(saver, "t", [{"step": i} for i in range(2)])
        ledger = keys.ledger(tag, "").encode()
        seconds, micros = client.time()
        expires_ms = seconds * 1000 + micros // 1000 + client.pttl(ledger)
        assert expires_ms >= registry(client, keys)[tag] * 1000
        for key in client.scan_iter(match=keys.thread_keys_pattern("t")):
            if key != ledger:
                client.unlink(key)  # (what 0.1.0's delete_thread removes)
        assert saver.get_tuple(cfg("t")) is None
        assert listed_ids(saver, cfg("t")) == []
