"""Semantic search on the server's vector search (a Redis Stack's RediSearch): the path is
really taken, its answers are the client path's (InMemoryStore's), the vectors' documents go
with their items (re-put, delete, expiry, purge, sweep: no orphan keys), the index refuses
another dims, prefixes stay apart, and a server without FT.* is refused when asked for."""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

import pytest
import redis

from langgraph.store.rediskv import AsyncRedisStore, RedisStore, semantic
from langgraph.store.rediskv.keys import (
    parse_vector_doc_key,
    vector_doc_key,
    vector_doc_prefix,
)

from ..conftest import new_prefix

VECTORS = {
    "tea": [1.0, 0.0, 0.0, 0.0],
    "coffee": [0.0, 1.0, 0.0, 0.0],
    "tea and coffee": [1.0, 1.0, 0.0, 0.0],
    "water": [0.0, 0.0, 1.0, 0.0],
    "hot drink": [1.0, 0.0, 0.0, 0.0],
    "cold": [-1.0, 0.0, 0.0, 0.0],
    "zero": [0.0, 0.0, 0.0, 0.0],
}


def embed(texts: list[str]) -> list[list[float]]:
    return [VECTORS[t] if t in VECTORS else vector_of(t) for t in texts]


def vector_of(text: str) -> list[float]:
    """``"v<n>"``: a vector at angle n degrees in the first plane (distinct scores)."""
    angle = math.radians(int(text[1:]))
    return [math.cos(angle), math.sin(angle), 0.0, 0.0]


INDEX: dict[str, Any] = {"dims": 4, "embed": embed, "fields": ["text", "tags[*]"]}


def keyed(items: list[Any]) -> list[tuple[str, float | None]]:
    return [(i.key, i.score) for i in items]


def doc_keys(client: redis.Redis, prefix: str) -> list[bytes]:
    return sorted(client.scan_iter(match=vector_doc_prefix(prefix) + "*", count=1000))


def ft_searches(client: redis.Redis) -> int:
    stats = client.info("commandstats").get("cmdstat_FT.SEARCH")
    return int(stats["calls"]) if stats else 0


@pytest.fixture
def stack(stack_url: str) -> Iterator[redis.Redis]:
    with redis.Redis.from_url(stack_url) as client:
        yield client


@pytest.fixture
def store(stack_url: str) -> Iterator[RedisStore]:
    with RedisStore.from_conn_string(
        stack_url, prefix=new_prefix(), index=INDEX, vector_search="server"
    ) as store:
        yield store


def test_the_server_path_is_taken_and_ranks_as_inmemorystore(
    store: RedisStore, stack: redis.Redis
) -> None:
    store.put(("docs",), "d1", {"text": "coffee"})
    store.put(("docs",), "d2", {"text": "tea and coffee"})
    store.put(("docs", "old"), "d3", {"text": "tea"})
    store.put(("docs",), "d4", {"text": "water"})
    store.put(("other",), "d5", {"text": "tea"})
    store.put(("docs",), "d6", {"text": "zero"})
    store.put(("docs",), "d7", {"text": "cold"})
    store.put(("docs",), "d8", {"kind": "no text"})
    assert store.config.server_search
    before = ft_searches(stack)
    found = store.search(("docs",), query="hot drink", limit=10)
    assert ft_searches(stack) > before
    assert keyed(found) == [
        ("d3", 1.0),
        ("d2", 1 / math.sqrt(2)),
        ("d6", 0.0),  # (a zero vector: 0, newest first among the ties)
        ("d4", 0.0),
        ("d1", 0.0),
        ("d7", -1.0),
        ("d8", None),
    ]
    assert keyed(store.search(("docs",), query="hot drink", limit=2, offset=3)) == [
        ("d4", 0.0),
        ("d1", 0.0),
    ]
    assert keyed(store.search(("docs", "old"), query="cold", limit=10)) == [("d3", -1.0)]
    assert [i.key for i in store.search((), query="tea", filter={"text": "tea"})] == ["d5", "d3"]
    # the same data on the client path: the same answers
    client_store = RedisStore(
        client=stack, prefix=store.config.prefix, index=INDEX, vector_search="client"
    )
    for query, prefix in [("hot drink", ("docs",)), ("cold", ()), ("water", ("docs",))]:
        assert keyed(client_store.search(prefix, query=query, limit=10)) == keyed(
            store.search(prefix, query=query, limit=10)
        )


def test_a_filter_that_keeps_few_asks_the_knn_again_and_stays_exact(
    store: RedisStore, stack: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(semantic, "KNN_MIN", 4)
    for n in range(0, 180, 5):  # 36 items, the nearest first; every 9th kept by the filter
        store.put(("a", str(n % 3)), f"k{n}", {"text": f"v{n}", "keep": n % 45 == 0})
    before = ft_searches(stack)
    found = store.search(("a",), query="v0", filter={"keep": True}, limit=3)
    assert ft_searches(stack) - before >= 2  # K = 12, then 48
    assert [i.key for i in found] == ["k0", "k45", "k90"]
    assert [round(i.score or 0, 12) for i in found] == [1.0, round(math.cos(math.pi / 4), 12), 0.0]
    # a filter that keeps nothing: every vector is asked for, then the plain pages
    assert store.search(("a",), query="v0", filter={"keep": "never"}, limit=3) == []


def test_past_knn_max_the_search_is_the_clients(
    store: RedisStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(semantic, "KNN_MIN", 2)
    monkeypatch.setattr(semantic, "KNN_MAX", 8)
    for n in range(0, 100, 5):
        store.put(("a",), f"k{n}", {"text": f"v{n}", "keep": n >= 90})
    found = store.search(("a",), query="v0", filter={"keep": True}, limit=2)
    assert [i.key for i in found] == ["k90", "k95"]


def test_the_documents_go_with_their_items(store: RedisStore, stack: redis.Redis) -> None:
    prefix = store.config.prefix
    store.put(("n",), "k", {"text": "tea", "tags": ["coffee", "water"]})
    assert doc_keys(stack, prefix) == sorted(
        vector_doc_key(prefix, ("n",), "k", i).encode() for i in range(3)
    )
    store.put(("n",), "k", {"text": "coffee"})  # a re-put replaces them
    assert doc_keys(stack, prefix) == [vector_doc_key(prefix, ("n",), "k", 0).encode()]
    assert keyed(store.search((), query="coffee")) == [("k", 1.0)]
    assert keyed(store.search((), query="tea")) == [("k", 0.0)]
    store.put(("n",), "k", {"text": "tea"}, index=False)  # no vectors: no documents
    assert doc_keys(stack, prefix) == []
    assert keyed(store.search((), query="tea")) == [("k", None)]
    store.put(("n",), "k", {"text": "tea"})
    store.delete(("n",), "k")
    assert doc_keys(stack, prefix) == []
    assert store.search((), query="tea") == []


def test_expired_items_lose_their_documents_at_read_purge_and_sweep(
    stack_url: str, stack: redis.Redis
) -> None:
    prefix = new_prefix()
    ms = [1_900_000_000_000]
    with RedisStore.from_conn_string(
        stack_url, prefix=prefix, index=INDEX, vector_search="server", ttl={"default_ttl": 1}
    ) as store:
        store.config.clock = lambda: ms[0]
        store.put(("read",), "k", {"text": "tea"})
        store.put(("put",), "k", {"text": "tea"})
        store.put(("swept",), "k", {"text": "tea", "tags": ["coffee"]})
        store.put(("read",), "forever", {"text": "coffee"}, ttl=None)
        assert len(doc_keys(stack, prefix)) == 5
        ms[0] += 61_000
        # a search never returns an expired item; reading it drops it with its documents
        assert keyed(store.search(("read",), query="tea")) == [("forever", 0.0)]
        store.put(("put",), "other", {"kind": "no text"})  # a put purges its namespace
        assert doc_keys(stack, prefix) == sorted(
            [
                vector_doc_key(prefix, ("read",), "forever", 0).encode(),
                vector_doc_key(prefix, ("swept",), "k", 0).encode(),
                vector_doc_key(prefix, ("swept",), "k", 1).encode(),
            ]
        )
        assert store.sweep_ttl() == 1
        assert doc_keys(stack, prefix) == [vector_doc_key(prefix, ("read",), "forever", 0).encode()]


def test_a_key_names_its_namespace_and_item_whatever_they_hold(
    store: RedisStore, stack: redis.Redis
) -> None:
    prefix = store.config.prefix
    tricky = [(("x}:0:y",), "k"), (("x",), "0:y}:0:k"), (("a", "{b}"), "c:1:d")]
    for namespace, key in tricky:
        store.put(namespace, key, {"text": "tea"})
    keys = doc_keys(stack, prefix)
    assert keys == sorted(vector_doc_key(prefix, n, k, 0).encode() for n, k in tricky)
    assert sorted(parse_vector_doc_key(prefix, d) for d in keys) == sorted(
        (n, k, 0) for n, k in tricky
    )
    found = store.search((), query="tea", limit=10)
    assert sorted((tuple(i.namespace), i.key) for i in found) == sorted(tricky)


def test_another_dims_on_the_same_prefix_is_refused(store: RedisStore, stack_url: str) -> None:
    store.setup()
    other = {**INDEX, "dims": 3}
    with (
        RedisStore.from_conn_string(stack_url, prefix=store.config.prefix, index=other) as wrong,
        pytest.raises(ValueError, match=r"has dims=4; this store's index has dims=3"),
    ):
        wrong.setup()


def test_two_prefixes_on_one_server_do_not_see_each_other(stack_url: str) -> None:
    with (
        RedisStore.from_conn_string(stack_url, prefix=new_prefix(), index=INDEX) as one,
        RedisStore.from_conn_string(stack_url, prefix=new_prefix(), index=INDEX) as two,
    ):
        one.put(("u",), "a", {"text": "tea"})
        two.put(("u",), "b", {"text": "coffee"})
        assert one.config.server_search and two.config.server_search  # ("auto" found it)
        assert keyed(one.search((), query="tea")) == [("a", 1.0)]
        assert keyed(two.search((), query="tea")) == [("b", 0.0)]


def test_a_search_renews_only_the_items_it_returns(stack_url: str, stack: redis.Redis) -> None:
    prefix = new_prefix()
    with RedisStore.from_conn_string(
        stack_url, prefix=prefix, index=INDEX, ttl={"default_ttl": 10}, vector_search="server"
    ) as store:
        ms = [1_900_000_000_000]
        store.config.clock = lambda: ms[0]
        store.put(("u",), "near", {"text": "tea"})
        store.put(("u",), "far", {"text": "cold"})
        ms[0] += 60_000
        assert keyed(store.search(("u",), query="tea", limit=1, refresh_ttl=True)) == [
            ("near", 1.0)
        ]
        expiry = stack.zrange(f"{prefix}:{{{prefix}:u}}:x", 0, -1, withscores=True)
        assert dict(expiry) == {b"far": ms[0] - 60_000 + 600_000, b"near": ms[0] + 600_000}


async def test_the_async_store_takes_the_server_path(stack_url: str, stack: redis.Redis) -> None:
    async with AsyncRedisStore.from_conn_string(
        stack_url, prefix=new_prefix(), index=INDEX, vector_search="server"
    ) as store:
        await store.aput(("u",), "a", {"text": "tea"})
        await store.aput(("u",), "b", {"text": "coffee"})
        before = ft_searches(stack)
        found = await store.asearch(("u",), query="hot drink")
        assert keyed(found) == [("a", 1.0), ("b", 0.0)]
        assert ft_searches(stack) > before


def test_a_server_without_vector_search(server_url: str, client: redis.Redis) -> None:
    if "search" in {m[b"name"] for m in client.module_list()}:
        pytest.skip("the server under test has a vector search")
    prefix = new_prefix()
    with RedisStore.from_conn_string(server_url, prefix=prefix, index=INDEX) as auto:
        auto.put(("u",), "a", {"text": "tea"})  # "auto": the client path, no documents
        assert not auto.config.server_search
        assert keyed(auto.search(("u",), query="tea")) == [("a", 1.0)]
        assert doc_keys(client, prefix) == []
    with (
        RedisStore.from_conn_string(
            server_url, prefix=prefix, index=INDEX, vector_search="server"
        ) as forced,
        pytest.raises(RuntimeError, match="the server has no vector search"),
    ):
        forced.search(("u",), query="tea")


def test_vector_search_takes_three_values() -> None:
    with pytest.raises(ValueError, match="vector_search must be 'auto', 'server' or 'client'"):
        RedisStore("redis://localhost:1/0", index=INDEX, vector_search="yes")  # type: ignore[arg-type]


def test_a_prefix_written_without_the_index_stays_on_the_client_path(stack_url: str) -> None:
    prefix = new_prefix()
    with RedisStore.from_conn_string(
        stack_url, prefix=prefix, index=INDEX, vector_search="client"
    ) as before:
        before.put(("u",), "a", {"text": "tea"})  # (no documents: the server would miss it)
    with RedisStore.from_conn_string(stack_url, prefix=prefix, index=INDEX) as auto:
        assert keyed(auto.search(("u",), query="tea")) == [("a", 1.0)]
        assert not auto.config.server_search
    with (
        RedisStore.from_conn_string(
            stack_url, prefix=prefix, index=INDEX, vector_search="server"
        ) as forced,
        pytest.raises(RuntimeError, match="holds items written without the server's"),
    ):
        forced.setup()
