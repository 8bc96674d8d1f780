"""``RedisStore.import_items`` (what ``rediskv store migrate`` writes with): a copy keeps the
source's value, created_at and updated_at exactly, wherever that puts it among the
namespace's items; a second run finds it present (the same value JSON: ``1`` is not
``true``); another item there is a conflict, replaced in one step only when asked; items a
put would refuse are "invalid" and not sent; an index embeds the copies (and present items
without vectors); ``ttl_minutes`` gives the copies a TTL."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
import redis
from langgraph.store.base import Item

from langgraph.store.rediskv import AsyncRedisStore, RedisStore
from langgraph.store.rediskv.imports import micros
from langgraph.store.rediskv.keys import namespace_keys
from langgraph.store.rediskv.migrate import StoreSource, migrate_store

from ..conftest import new_prefix
from .test_store_vectors import KnownEmbeddings

T0 = datetime(2025, 3, 4, 5, 6, 7, 123456, tzinfo=timezone.utc)


def item(namespace: tuple[str, ...], key: str, value: Any, created: int, updated: int) -> Item:
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


def facts(found: list[Any]) -> list[tuple[tuple[str, ...], str, Any, int, int]]:
    return [
        (tuple(i.namespace), i.key, i.value, micros(i.created_at), micros(i.updated_at))
        for i in found
    ]


def newest_first(items: list[Item]) -> list[Item]:
    return sorted(items, key=lambda i: (i.updated_at, i.key), reverse=True)


def test_copies_keep_values_and_times_and_a_second_run_finds_them(store: RedisStore) -> None:
    assert store.import_items(SOURCE, dry_run=True) == ["to copy"] * 4
    assert store.search(("users",)) == []
    assert store.list_namespaces() == []
    assert store.import_items(SOURCE) == ["copied"] * 4
    assert facts(store.search(("users",))) == facts(newest_first(SOURCE))
    assert store.list_namespaces() == [("users",), ("users", "u1"), ("users", "u2")]
    assert store.import_items(SOURCE) == ["present"] * 4
    assert store.import_items(SOURCE, dry_run=True) == ["present"] * 4


def test_old_copies_stay_behind_newer_items_of_the_namespace(store: RedisStore) -> None:
    """A copy is a new item with its own stamp, not an update: it does not jump above what
    the application wrote since (nor do a page's items above the previous page's)."""
    store.put(("users", "u1"), "fresh", {"text": "today"})
    assert store.import_items(SOURCE[:2]) == ["copied", "copied"]
    found = store.search(("users", "u1"))
    assert [i.key for i in found] == ["fresh", "a", "b"]
    assert facts(found[1:]) == facts(SOURCE[:2])


def test_ties_keep_their_stamps(store: RedisStore) -> None:
    """A PostgresStore batch stamps its items alike: so do their copies (ties are ordered by
    key, newest first as a search reads them)."""
    tied = [
        item(("n",), "x", {"v": 1}, 0, 7),
        item(("n",), "y", {"v": 2}, 0, 7),
        item(("n",), "z", {"v": 3}, 0, 6),
    ]
    assert store.import_items(tied) == ["copied"] * 3
    assert facts(store.search(("n",))) == facts([tied[1], tied[0], tied[2]])


def test_a_differing_item_is_a_conflict_unless_replaced(store: RedisStore) -> None:
    store.import_items(SOURCE)
    store.put(("users", "u1"), "a", {"text": "mine"})
    mine = store.get(("users", "u1"), "a")
    assert mine is not None
    assert store.import_items(SOURCE) == ["conflict", "present", "present", "present"]
    assert store.import_items(SOURCE, recopy=True, dry_run=True)[0] == "to replace"
    assert facts([store.get(("users", "u1"), "a")]) == facts([mine])
    assert store.import_items(SOURCE, recopy=True) == ["replaced", "present", "present", "present"]
    copy = store.get(("users", "u1"), "a")
    assert copy is not None
    assert (copy.value, micros(copy.created_at)) == (SOURCE[0].value, micros(SOURCE[0].created_at))
    # replaced is an update: its stamp goes above the namespace's newest (its own, here)
    assert micros(copy.updated_at) == micros(mine.updated_at) + 1
    assert store.import_items(SOURCE) == ["present"] * 4


def test_the_same_value_json_is_present_not_an_equal_python_value(store: RedisStore) -> None:
    one = [item(("t",), "k", {"flag": 1}, 0, 0)]
    assert store.import_items(one) == ["copied"]
    assert store.import_items([item(("t",), "k", {"flag": True}, 0, 0)]) == ["conflict"]
    assert store.import_items([item(("t",), "k", {"flag": 1.0}, 0, 0)]) == ["conflict"]
    assert store.import_items(one) == ["present"]


def test_an_item_that_lost_its_value_is_copied_whole_again(
    store: RedisStore, client: redis.Redis
) -> None:
    store.import_items(SOURCE[:1])
    client.hdel(namespace_keys(store.config.prefix, ("users", "u1"))[0], "a")  # evicted
    assert store.import_items(SOURCE[:1]) == ["copied"]
    assert facts([store.get(("users", "u1"), "a")]) == facts(SOURCE[:1])


def test_items_a_put_refuses_are_invalid_and_not_sent(store: RedisStore) -> None:
    bad = [
        item(("a.b",), "k", {"v": 1}, 0, 0),
        item((), "k", {"v": 1}, 0, 0),
        item(("langgraph", "x"), "k", {"v": 1}, 0, 0),
        item(("a", ""), "k", {"v": 1}, 0, 0),
        item(("a",), "k", {"when": T0}, 0, 0),
        item(("a",), "nan", {"v": float("nan")}, 0, 0),
    ]
    statuses = store.import_items([*bad, SOURCE[0]])
    # (the message of json's refusal of NaN ends differently from one Python to another)
    nan = "invalid: a value that is not JSON (Out of range float values are not JSON compliant"
    assert statuses[5].startswith(nan)
    statuses[5] = nan
    assert statuses == [
        "invalid: Invalid namespace label 'a.b' found in ('a.b',). Namespace labels cannot "
        "contain periods ('.').",
        "invalid: an empty namespace",
        "invalid: a namespace under 'langgraph' (reserved)",
        "invalid: Namespace labels cannot be empty strings. Got  in ('a', '')",
        "invalid: a value that is not JSON (Object of type datetime is not JSON serializable)",
        nan,
        "copied",
    ]
    assert store.list_namespaces() == [("users", "u1")]


def test_an_index_embeds_what_it_writes_and_ttl_minutes_gives_a_ttl(
    server_url: str, client: redis.Redis
) -> None:
    embeddings = KnownEmbeddings()
    index = {"dims": 4, "embed": embeddings, "fields": ["text"]}
    prefix = new_prefix()
    with RedisStore.from_conn_string(server_url, prefix=prefix) as plain:
        assert plain.import_items(SOURCE[:2]) == ["copied", "copied"]  # (no vectors)
    with RedisStore.from_conn_string(server_url, prefix=prefix, index=index) as store:
        assert store.import_items(SOURCE, ttl_minutes=2) == [
            "present",
            "present",
            "copied",
            "copied",
        ]
        # the copies, and the present items that had no vectors
        assert embeddings.documents == [["tea", "coffee", "water", "tea and coffee"]]
        found = store.search(("users",), query="coffee", limit=2)
        assert [(i.key, i.score) for i in found] == [
            ("b", 1.0),
            ("root", pytest.approx(0.7071, abs=1e-4)),
        ]
        ttls = namespace_keys(prefix, ("users", "u2"))[4]
        assert client.hget(ttls, "a") == b"120000"  # the copies' TTL (ms)
        assert client.hget(namespace_keys(prefix, ("users", "u1"))[4], "a") is None
        # a second run embeds nothing: nothing is written
        assert store.import_items(SOURCE) == ["present"] * 4
        assert len(embeddings.documents) == 1


async def test_async_import(server_url: str) -> None:
    async with AsyncRedisStore.from_conn_string(server_url, prefix=new_prefix()) as store:
        assert await store.import_items(SOURCE) == ["copied"] * 4
        assert await store.import_items(SOURCE, dry_run=True) == ["present"] * 4
        assert facts(await store.asearch(("users",))) == facts(newest_first(SOURCE))


class CountedSource(StoreSource):
    """A source that says it holds ``held`` items and counts how often it is asked."""

    def __init__(self, items: list[Item], held: int) -> None:
        super().__init__("counted")
        self.items, self.held, self.asked = items, held, 0

    def pages(self, namespace_prefix: tuple[str, ...]) -> Iterator[list[Item]]:
        yield self.items

    def count(self, namespace_prefix: tuple[str, ...]) -> int | None:
        self.asked += 1
        return self.held


@pytest.mark.parametrize(
    ("held", "problems"),
    [
        (4, []),
        (5, ["read 4 distinct items, but the source holds 5"]),
        (3, ["read 4 distinct items, but the source holds 3: it changed meanwhile"]),
    ],
)
def test_a_migration_asks_the_source_for_its_count_once(
    store: RedisStore, held: int, problems: list[str]
) -> None:
    source = CountedSource(SOURCE, held)
    report = migrate_store(source, store, dry_run=True)
    assert (report.source_count, report.problems, source.asked) == (held, problems, 1)
