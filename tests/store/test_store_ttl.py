"""TTL by example, on a virtual clock (the store config's ``clock``), and the store in a graph."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import redis
from langgraph.config import get_store
from langgraph.graph import START, StateGraph
from langgraph.store.base import PutOp, TTLConfig
from typing_extensions import TypedDict

from langgraph.store.rediskv import AsyncRedisStore, RedisStore, core

from ..conftest import new_prefix


class Clock:
    def __init__(self) -> None:
        self.ms = 1_900_000_000_000

    def advance(self, minutes: float) -> None:
        self.ms += int(minutes * 60_000)

    def now(self) -> int:
        return self.ms

    def drive(self, store: RedisStore | AsyncRedisStore) -> None:
        store.config.clock = self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def store(server_url: str) -> Iterator[RedisStore]:
    with RedisStore.from_conn_string(
        server_url, prefix=new_prefix(), ttl={"default_ttl": 10, "refresh_on_read": True}
    ) as store:
        yield store


def test_an_expired_item_is_gone_from_get_search_and_listing(
    store: RedisStore, clock: Clock, client: redis.Redis
) -> None:
    clock.drive(store)
    store.put(("u", "1"), "old", {"v": 1})
    clock.advance(5)
    store.put(("u", "2"), "new", {"v": 2})
    clock.advance(0.001)
    store.put(("u", "2"), "kept", {"v": 3}, ttl=None)
    clock.advance(5 - 0.001)  # "old" expires now (10 minutes), "new" in 5
    assert store.get(("u", "1"), "old") is None
    assert [i.key for i in store.search(("u",))] == ["kept", "new"]
    assert store.list_namespaces() == [("u", "2")]
    # its index entries went with it, and the sweep took the namespace from the global index
    keys = [k.decode() for k in client.keys(f"{store.config.prefix}:*")]
    assert not [k for k in keys if ":u.1}" in k]
    assert client.zrange(f"{store.config.prefix}:store:ns", 0, -1) == [b"u\x002"]


def test_refresh_on_read_and_refresh_ttl_false(store: RedisStore, clock: Clock) -> None:
    clock.drive(store)
    store.put(("n",), "a", {"v": 1})
    store.put(("n",), "b", {"v": 2})
    clock.advance(8)
    assert store.get(("n",), "a") is not None  # refreshed: 10 more minutes
    assert store.get(("n",), "b", refresh_ttl=False) is not None
    clock.advance(8)
    assert store.get(("n",), "a") is not None
    assert store.get(("n",), "b") is None
    assert [i.key for i in store.search(("n",))] == ["a"]


def test_per_item_ttl_and_a_put_without_ttl_config(server_url: str, clock: Clock) -> None:
    with RedisStore.from_conn_string(server_url, prefix=new_prefix()) as store:
        clock.drive(store)
        store.put(("n",), "short", {"v": 1}, ttl=1)
        store.put(("n",), "forever", {"v": 2})
        clock.advance(1)
        assert store.get(("n",), "short") is None
        assert store.get(("n",), "forever") is not None
        assert store.search(("n",), limit=5)[0].key == "forever"


async def test_async_store_round_trip(server_url: str, clock: Clock) -> None:
    async with AsyncRedisStore.from_conn_string(server_url, prefix=new_prefix()) as store:
        clock.drive(store)
        await store.aput(("m", "x"), "k", {"nested": {"a": 1}, "n": 5})
        item = await store.aget(("m", "x"), "k")
        assert item is not None and item.value == {"nested": {"a": 1}, "n": 5}
        assert item.created_at.timestamp() * 1000 == clock.ms
        found = await store.asearch(("m",), filter={"nested": {"a": 1}, "n": {"$gt": 4}})
        assert [(tuple(i.namespace), i.key, i.score) for i in found] == [(("m", "x"), "k", None)]
        assert await store.alist_namespaces(prefix=("m",)) == [("m", "x")]
        await store.adelete(("m", "x"), "k")
        assert await store.alist_namespaces() == []


async def test_async_store_takes_sync_calls_from_other_threads(server_url: str) -> None:
    """A sync node or tool of an async graph runs in an executor thread and calls the
    store's sync methods: they run on the store's loop."""
    async with AsyncRedisStore.from_conn_string(server_url, prefix=new_prefix()) as store:
        await store.alist_namespaces()  # (the store learns its loop)
        await asyncio.to_thread(store.put, ("t",), "k", {"v": 1})
        got = await asyncio.to_thread(store.get, ("t",), "k")
        assert got is not None and got.value == {"v": 1}
        assert (await store.aget(("t",), "k")).value == {"v": 1}  # type: ignore[union-attr]
        with pytest.raises(asyncio.InvalidStateError, match="only allowed from a different"):
            store.get(("t",), "k")


class State(TypedDict):
    user: str
    said: str


def remember(state: State) -> dict[str, Any]:
    store = get_store()
    namespace = ("memories", state["user"])
    seen = [i.value["said"] for i in store.search(namespace, limit=100)]
    store.put(namespace, f"m{len(seen)}", {"said": state["said"]})
    return {}


def test_a_graph_reads_and_writes_memories_from_two_threads(store: RedisStore) -> None:
    graph = StateGraph(State).add_node("remember", remember)
    graph.add_edge(START, "remember")
    app = graph.compile(store=store)

    def user(name: str) -> None:
        for n in range(5):
            app.invoke({"user": name, "said": f"{name}-{n}"})

    threads = [threading.Thread(target=user, args=(name,)) for name in ("alice", "bob")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for name in ("alice", "bob"):
        said = [i.value["said"] for i in store.search(("memories", name), limit=100)]
        assert said == [f"{name}-{n}" for n in range(4, -1, -1)]
    assert store.list_namespaces(prefix=("memories",)) == [
        ("memories", "alice"),
        ("memories", "bob"),
    ]


def test_a_namespace_filled_during_the_sweep_of_the_index_stays_listed(
    store: RedisStore, client: redis.Redis
) -> None:
    """list_namespaces counts a namespace empty, then removes it from the global index; a put
    that fills it between the two (its own ZADD came first) must not leave it unlisted."""
    from langgraph.store.base import ListNamespacesOp

    store.put(("a",), "k", {"v": 1})
    store.delete(("a",), "k")  # empty, still named by the index until a listing sweeps it
    rounds = core.run_batch(
        store.config, [ListNamespacesOp(match_conditions=None, max_depth=None, limit=10)]
    )
    calls = next(rounds)
    try:
        while True:
            if any(call[1] == "ZREM" for call in calls):
                store.put(("a",), "k2", {"v": 2})  # (between the count and the ZREM)
            calls = rounds.send(store._run(calls))
    except StopIteration:
        pass
    assert store.list_namespaces() == [("a",)]
    assert [item.key for item in store.search(("a",))] == ["k2"]


def test_sweep_ttl_frees_expired_items_in_bounded_steps(
    server_url: str, clock: Clock, client: redis.Redis
) -> None:
    """A namespace nobody reads again keeps its expired items until a sweep: each call goes
    over at most max_namespaces namespaces of the index, on from where the last one stopped."""
    with RedisStore.from_conn_string(server_url, prefix=new_prefix()) as store:
        clock.drive(store)
        for n in ("a", "b", "c"):
            store.put((n,), "gone", {"v": 1}, ttl=1)
            store.put((n,), "gone2", {"v": 1}, ttl=1)
        store.put(("c",), "kept", {"v": 2})
        clock.advance(1)
        assert store.sweep_ttl(max_namespaces=2) == 4  # a and b
        assert client.zrange(f"{store.config.prefix}:store:ns", 0, -1) == [b"c"]
        assert store.sweep_ttl(max_namespaces=2) == 2  # c, then the index is done
        assert store.sweep_ttl(max_namespaces=2) == 0  # from the first again: c
        keys = sorted(k.decode() for k in client.keys(f"{store.config.prefix}:*"))
        assert [k.rsplit(":", 1)[1] for k in keys] == ["ns", "h", "m", "z"]
        assert [i.key for i in store.search(("c",))] == ["kept"]


async def test_async_sweep_ttl(server_url: str, clock: Clock) -> None:
    async with AsyncRedisStore.from_conn_string(server_url, prefix=new_prefix()) as store:
        clock.drive(store)
        await store.aput(("a",), "k", {"v": 1}, ttl=1)
        clock.advance(1)
        assert await store.sweep_ttl() == 1
        assert await store.alist_namespaces() == []


def wait_for(condition: Callable[[], bool]) -> bool:
    deadline = time.monotonic() + 5
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


def test_the_ttl_sweeper_runs_every_sweep_interval(
    server_url: str, clock: Clock, client: redis.Redis
) -> None:
    ttl: TTLConfig = {"sweep_interval_minutes": 0.001}  # every 60 ms
    with RedisStore.from_conn_string(server_url, prefix=new_prefix(), ttl=ttl) as store:
        clock.drive(store)
        for n in range(3):
            store.put((f"n{n}",), "k", {"v": n}, ttl=1)
        clock.advance(1)
        sweeper = store.start_ttl_sweeper()
        assert store.start_ttl_sweeper() is sweeper
        assert wait_for(lambda: client.keys(f"{store.config.prefix}:*") == [])
        assert store.stop_ttl_sweeper(timeout=5) and sweeper.done()
    with (
        RedisStore.from_conn_string(server_url, prefix=new_prefix()) as store,
        pytest.raises(ValueError, match="no sweep interval"),
    ):
        store.start_ttl_sweeper()


async def test_the_async_ttl_sweeper(server_url: str, clock: Clock, client: redis.Redis) -> None:
    async with AsyncRedisStore.from_conn_string(server_url, prefix=new_prefix()) as store:
        clock.drive(store)
        await store.aput(("a",), "k", {"v": 1}, ttl=1)
        clock.advance(1)
        task = await store.start_ttl_sweeper(sweep_interval_minutes=0.001)
        for _ in range(250):
            if not client.keys(f"{store.config.prefix}:*"):
                break
            await asyncio.sleep(0.02)
        assert client.keys(f"{store.config.prefix}:*") == []
        assert await store.stop_ttl_sweeper(timeout=5) and task.done()


async def test_the_async_sweeper_stops_when_its_cancel_lands_in_a_read(
    server_url: str, client: redis.Redis
) -> None:
    """redis-py may raise the cancel of a task waiting on a reply as a ConnectionError (it
    closes the connection): the sweeper took it for a failed sweep, logged it and swept on,
    and stop_ttl_sweeper returned False (half of 40 stops, before the fix)."""
    async with AsyncRedisStore.from_conn_string(server_url, prefix=new_prefix()) as store:
        # 3,000 namespaces: a sweep takes long enough for a stop to land in it
        await store.abatch([PutOp(("n", str(i)), "k", {"v": 1}) for i in range(3000)])
        stopped = []
        for trial in range(40):
            task = await store.start_ttl_sweeper(sweep_interval_minutes=0.00001)
            await asyncio.sleep(0.003 * (trial % 7 + 1))
            stopped.append(await store.stop_ttl_sweeper(timeout=2) and task.done())
            task.cancel()
        assert stopped == [True] * 40
        assert await store.aget(("n", "7"), "k") is not None  # (the store works on)
