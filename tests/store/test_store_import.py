"""``RedisStore.import_items`` (what ``rediskv store migrate`` writes with): copies keep the
source's value, created_at and updated_at, a second run finds them present, a differing item
is a conflict unless ``recopy``, the source's order holds where stamps tie, an index embeds
the copies, and ``ttl_minutes`` gives them a TTL."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timedelta, timezone

import pytest
import redis
from langgraph.store.base import Item

from langgraph.store.rediskv import AsyncRedisStore, RedisStore
from langgraph.store.rediskv.core import micros
from langgraph.store.rediskv.keys import namespace_keys

from ..conftest import new_prefix
from .test_store_vectors import KnownEmbeddings

T0 = datetime(2025, 3, 4, 5, 6, 7, 123456, tzinfo=timezone.utc)


def item(namespace: tuple[str, ...], key: str, value: dict, created: int, updated: int) -> Item:
    """An item as another store returns it; times in µs after T0."""
    return Item(
        value=value,
        key=key,
        namespace=namespace,
        created_at=T0 + timedelta(microseconds=created),
        updated_at=T0 + timedelta(microseconds=updated),
    )


SOURCE = [
    item(("users", "u1"), "a", {"text": "tea", "n": 1}, 0, 5),
    item(("users", "u1"), "b", {"text": "coffee", "n": 2}, 1, 3),
    item(("users", "u2"), "a", {"text": "water", "n": 3}, 2, 2),
    item(("users",), "root", {"text": "tea and coffee"}, 3, 9),
]


@pytest.fixture
def store(server_url: str) -> Iterator[RedisStore]:
    with RedisStore.from_conn_string(server_url, prefix=new_prefix()) as s:
        yield s


def facts(found: list[Item]) -> list[tuple[tuple[str, ...], str, dict, int, int]]:
    return [
        (tuple(i.namespace), i.key, i.value, micros(i.created_at), micros(i.updated_at))
        for i in found
    ]


def test_copies_keep_values_and_times_and_a_second_run_finds_them(store: RedisStore) -> None:
    assert store.import_items(SOURCE, dry_run=True) == ["to copy"] * 4
    assert store.search(("users",)) == []
    assert store.import_items(SOURCE) == ["copied"] * 4
    # newest-updated first, each with the source's exact stamps
    assert facts(store.search(("users",))) == facts(
        sorted(SOURCE, key=lambda i: i.updated_at, reverse=True)
    )
    assert store.list_namespaces() == [("users",), ("users", "u1"), ("users", "u2")]
    assert store.import_items(SOURCE) == ["present"] * 4


def test_a_differing_item_is_a_conflict_unless_recopied(store: RedisStore) -> None:
    store.import_items(SOURCE)
    store.put(("users", "u1"), "a", {"text": "mine"})
    plans = ["conflict", "present", "present", "present"]
    assert store.import_items(SOURCE) == plans
    assert store.get(("users", "u1"), "a").value == {"text": "mine"}  # type: ignore[union-attr]
    assert store.import_items(SOURCE, recopy=True, dry_run=True)[0] == "to replace"
    assert store.get(("users", "u1"), "a").value == {"text": "mine"}  # type: ignore[union-attr]
    assert store.import_items(SOURCE, recopy=True) == ["replaced", *plans[1:]]
    # the item it replaces goes first: the copy is the source's, stamps too
    assert facts([store.get(("users", "u1"), "a")]) == facts(SOURCE[:1])  # type: ignore[list-item]
    # a newer item of the namespace (not the one replaced): the copy's stamp goes above it
    store.put(("users", "u1"), "c", {"text": "newer"})
    newest = store.get(("users", "u1"), "c")
    assert newest is not None
    assert store.import_items(SOURCE, recopy=True)[0] == "present"
    store.put(("users", "u1"), "a", {"text": "mine again"})
    assert store.import_items(SOURCE, recopy=True)[0] == "replaced"
    copy = store.get(("users", "u1"), "a")
    assert copy is not None
    assert micros(copy.created_at) == micros(SOURCE[0].created_at)
    assert micros(copy.updated_at) == micros(newest.updated_at) + 1


def test_an_item_that_lost_its_value_is_copied_whole_again(
    store: RedisStore, client: redis.Redis
) -> None:
    store.import_items(SOURCE[:1])
    client.hdel(namespace_keys(store.config.prefix, ("users", "u1"))[0], "a")  # evicted
    assert store.import_items(SOURCE[:1]) == ["replaced"]
    assert facts([store.get(("users", "u1"), "a")]) == facts(SOURCE[:1])  # type: ignore[list-item]


def test_ties_keep_the_source_order_one_microsecond_apart(store: RedisStore) -> None:
    tied = [
        item(("n",), "x", {"v": 1}, 0, 7),
        item(("n",), "y", {"v": 2}, 0, 7),
        item(("n",), "z", {"v": 3}, 0, 6),
    ]
    assert store.import_items(tied) == ["copied"] * 3
    found = store.search(("n",))
    assert [(i.key, micros(i.updated_at) - micros(T0)) for i in found] == [
        ("y", 8),
        ("x", 7),
        ("z", 6),
    ]


def test_an_index_embeds_the_copies_and_ttl_minutes_gives_a_ttl(
    server_url: str, client: redis.Redis
) -> None:
    embeddings = KnownEmbeddings()
    index = {"dims": 4, "embed": embeddings, "fields": ["text"]}
    with RedisStore.from_conn_string(server_url, prefix=new_prefix(), index=index) as store:
        assert store.import_items(SOURCE, ttl_minutes=2) == ["copied"] * 4
        assert embeddings.documents == [["tea", "coffee", "water", "tea and coffee"]]
        found = store.search(("users",), query="coffee", limit=2)
        assert [(i.key, i.score) for i in found] == [
            ("b", 1.0),
            ("root", pytest.approx(0.7071, abs=1e-4)),
        ]
        keys = namespace_keys(store.config.prefix, ("users", "u1"))
        assert client.hget(keys[4], "a") == b"120000"  # the TTL (ms), refreshed on reads
        # a second run embeds nothing: nothing is copied
        assert store.import_items(SOURCE) == ["present"] * 4
        assert len(embeddings.documents) == 1


async def test_async_import(server_url: str) -> None:
    async with AsyncRedisStore.from_conn_string(server_url, prefix=new_prefix()) as store:
        assert await store.import_items(SOURCE) == ["copied"] * 4
        assert await store.import_items(SOURCE, dry_run=True) == ["present"] * 4
        found = await store.asearch(("users",))
        assert facts(found) == facts(sorted(SOURCE, key=lambda i: i.updated_at, reverse=True))
