"""LangGraph's own store tests, as behaviours of this store: written anew here (none of their
code), each naming the upstream test it follows. Upstream files, in langchain-ai/langgraph:
``libs/checkpoint/tests/test_store.py`` (InMemoryStore and BaseStore, formerly
``libs/langgraph/tests/test_store.py``), ``libs/checkpoint-postgres/tests/test_store.py`` and
``test_async_store.py`` (PostgresStore), ``test_store_filter_condition(s).py``; and the official
Redis store's ``tests/test_store.py`` / ``test_async_store.py`` (redis-developer/langgraph-redis).

Every test runs on RedisStore and AsyncRedisStore (``kind``) and, where the behaviour is the
same, compares the answers with InMemoryStore's. Search order differs by design (docs/store.md):
newest-updated first here, as PostgresStore; insertion order in InMemoryStore.

Namespace validation: test_langgraph_store_cases_namespaces.py; TTL: ..._ttl.py; semantic
search: ..._semantic.py."""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from langgraph.store.base import GetOp, Item, ListNamespacesOp, MatchCondition, PutOp, SearchOp
from langgraph.store.memory import InMemoryStore

from langgraph.store.rediskv import AsyncRedisStore

from .cases import Store, call, keys, one, open_store, plain, shape

KINDS = pytest.mark.parametrize("kind", ["sync", "async"])


@pytest.fixture(params=["sync", "async"])
async def store(request: pytest.FixtureRequest, server_url: str) -> Any:
    async with open_store(server_url, request.param) as store:
        yield store


async def put_both(store: Store, model: InMemoryStore, rows: list[tuple[Any, ...]]) -> None:
    for namespace, key, value in rows:
        await call(store, "put", namespace, key, value)
        model.put(namespace, key, value)


async def batch_both(store: Store, model: InMemoryStore, ops: list[Any]) -> tuple[list, list]:
    ours = await call(store, "batch", ops)
    return [plain(r) for r in ours], [plain(r) for r in model.batch(ops)]


# ---- batch -------------------------------------------------------------------------------


# postgres test_store.py::test_batch_order, test_async_store.py::test_abatch_order,
# langgraph-redis test_store.py::test_batch_order
async def test_batch_order(store: Store) -> None:
    model = InMemoryStore()
    await put_both(
        store,
        model,
        [
            (("test", "foo"), "key1", {"data": "value1"}),
            (("test", "bar"), "key2", {"data": "value2"}),
        ],
    )
    ops = [
        GetOp(("test", "foo"), "key1"),
        PutOp(("test", "bar"), "key2", {"data": "value2"}),
        SearchOp(("test",), filter={"data": "value1"}, limit=10, offset=0),
        ListNamespacesOp(match_conditions=None, max_depth=None, limit=10, offset=0),
        GetOp(("test",), "key3"),
    ]
    ours, theirs = await batch_both(store, model, ops)
    assert (
        ours
        == theirs
        == [
            (("test", "foo"), "key1", {"data": "value1"}),
            None,
            [(("test", "foo"), "key1", {"data": "value1"})],
            [("test", "bar"), ("test", "foo")],
            None,
        ]
    )
    reordered = [
        SearchOp(("test",), filter=None, limit=5, offset=0),
        GetOp(("test", "bar"), "key2"),
        ListNamespacesOp(match_conditions=None, max_depth=None, limit=5, offset=0),
        PutOp(("test",), "key3", {"data": "value3"}),
        GetOp(("test", "foo"), "key1"),
    ]
    ours, theirs = await batch_both(store, model, reordered)
    # the search: newest-updated first (key2 was put again by the first batch), where
    # InMemoryStore answers in insertion order (documented difference)
    assert ours[0] == [
        (("test", "bar"), "key2", {"data": "value2"}),
        (("test", "foo"), "key1", {"data": "value1"}),
    ]
    assert theirs[0] == ours[0][::-1]
    assert ours[1:] == [
        (("test", "bar"), "key2", {"data": "value2"}),
        [("test", "bar"), ("test", "foo")],
        None,
        (("test", "foo"), "key1", {"data": "value1"}),
    ]
    # InMemoryStore lists ("test",) too: the first batch's get of ("test",) made it an empty
    # namespace of its dict; a namespace here is listed once it holds an item
    assert theirs[1:] == [ours[1], [("test",), *ours[2]], *ours[3:]]
    assert await call(store, "list_namespaces") == [("test",), ("test", "bar"), ("test", "foo")]


# postgres test_store.py::test_batch_get_ops, test_batch_put_ops (a None value deletes),
# test_async_store.py::test_batch_put_ops; langgraph-redis test_store.py::test_batch_put_ops
async def test_batch_get_and_put_ops(store: Store) -> None:
    model = InMemoryStore()
    puts = [
        PutOp(("test",), "key1", {"data": "value1"}),
        PutOp(("test",), "key2", {"data": "value2"}),
        PutOp(("test",), "key3", None),
    ]
    ours, theirs = await batch_both(store, model, puts)
    assert ours == theirs == [None, None, None]
    gets = [GetOp(("test",), "key1"), GetOp(("test",), "key2"), GetOp(("test",), "key3")]
    ours, theirs = await batch_both(store, model, gets)
    assert (
        ours
        == theirs
        == [
            (("test",), "key1", {"data": "value1"}),
            (("test",), "key2", {"data": "value2"}),
            None,
        ]
    )
    assert keys(await call(store, "search", ("test",), limit=10)) == ["key2", "key1"]


# postgres test_store.py::test_batch_search_ops, test_async_store.py::test_batch_search_ops,
# langgraph-redis test_store.py::test_batch_search_ops
async def test_batch_search_ops(store: Store) -> None:
    model = InMemoryStore()
    await put_both(
        store,
        model,
        [
            (("test", "foo"), "key1", {"data": "value1", "tag": "a"}),
            (("test", "bar"), "key2", {"data": "value2", "tag": "a"}),
            (("test", "baz"), "key3", {"data": "value3", "tag": "b"}),
        ],
    )
    ops = [
        SearchOp(("test",), filter={"tag": "a"}, limit=10, offset=0),
        SearchOp(("test",), filter=None, limit=2, offset=0),
        SearchOp(("test", "foo"), filter=None, limit=10, offset=0),
    ]
    ours, theirs = await batch_both(store, model, ops)
    assert ours == [
        [
            (("test", "bar"), "key2", {"data": "value2", "tag": "a"}),
            (("test", "foo"), "key1", {"data": "value1", "tag": "a"}),
        ],
        [
            (("test", "baz"), "key3", {"data": "value3", "tag": "b"}),
            (("test", "bar"), "key2", {"data": "value2", "tag": "a"}),
        ],
        [(("test", "foo"), "key1", {"data": "value1", "tag": "a"})],
    ]
    # InMemoryStore: the same items, oldest first (its limit keeps the two oldest)
    assert theirs[0] == ours[0][::-1] and theirs[2] == ours[2]
    assert [k for _, k, _ in theirs[1]] == ["key1", "key2"]


# postgres test_store.py::test_batch_list_namespaces_ops, test_async_store.py::
# test_batch_list_namespaces_ops, langgraph-redis test_store.py::test_batch_list_namespaces_ops
async def test_batch_list_namespaces_ops(store: Store) -> None:
    model = InMemoryStore()
    await put_both(
        store,
        model,
        [
            (("test", "documents", "public"), "doc1", {"content": "public doc"}),
            (("test", "documents", "private"), "doc2", {"content": "private doc"}),
            (("test", "images", "public"), "img1", {"content": "public image"}),
            (("prod", "documents", "public"), "doc3", {"content": "prod doc"}),
        ],
    )
    ops = [
        ListNamespacesOp(match_conditions=None, max_depth=None, limit=10, offset=0),
        ListNamespacesOp(match_conditions=None, max_depth=2, limit=10, offset=0),
        ListNamespacesOp((MatchCondition("suffix", ("public",)),), max_depth=None, limit=10),
        ListNamespacesOp(
            (MatchCondition("prefix", ("test",)), MatchCondition("suffix", ("public",))),
            max_depth=None,
            limit=1,
            offset=1,
        ),
    ]
    ours, theirs = await batch_both(store, model, ops)
    assert (
        ours
        == theirs
        == [
            [
                ("prod", "documents", "public"),
                ("test", "documents", "private"),
                ("test", "documents", "public"),
                ("test", "images", "public"),
            ],
            [("prod", "documents"), ("test", "documents"), ("test", "images")],
            [
                ("prod", "documents", "public"),
                ("test", "documents", "public"),
                ("test", "images", "public"),
            ],
            [("test", "images", "public")],
        ]
    )


# (the batch semantics InMemoryStore defines, which PostgresStore shares): reads see the store
# as it was before the batch's puts, the last put of an item wins, a delete in the batch too
async def test_mixed_ops_in_one_batch(store: Store) -> None:
    model = InMemoryStore()
    await put_both(store, model, [(("a",), "old", {"v": 0})])
    ops = [
        PutOp(("a",), "k1", {"v": 1}),
        GetOp(("a",), "k1"),
        PutOp(("a",), "old", None),
        GetOp(("a",), "old"),
        SearchOp(("a",), limit=10),
        ListNamespacesOp(match_conditions=None, limit=10),
        PutOp(("a", "b"), "k2", {"v": 2}),
        PutOp(("a",), "k1", {"v": 3}),
        PutOp(("a", "b"), "k2", None),
        GetOp(("a", "b"), "k2"),
    ]
    ours, theirs = await batch_both(store, model, ops)
    assert (
        ours
        == theirs
        == [
            None,
            None,
            None,
            (("a",), "old", {"v": 0}),
            [(("a",), "old", {"v": 0})],
            [("a",)],
            None,
            None,
            None,
            None,
        ]
    )
    assert one(await call(store, "get", ("a",), "k1")) == (("a",), "k1", {"v": 3})
    assert await call(store, "get", ("a",), "old") is None
    assert await call(store, "get", ("a", "b"), "k2") is None
    assert shape(await call(store, "search", ())) == [(("a",), "k1", {"v": 3})]
    # InMemoryStore still lists ("a", "b"), emptied in the batch; this store lists only the
    # namespaces holding items, as PostgresStore (docs/store.md, Key layout)
    assert model.list_namespaces() == [("a",), ("a", "b")]
    assert await call(store, "list_namespaces") == [("a",)]


# ---- get / put / delete ------------------------------------------------------------------


# postgres test_store.py::test_basic_store_ops, langgraph-redis test_store.py::test_basic_ops,
# test_async_store.py::test_basic_ops
async def test_basic_store_ops(store: Store) -> None:
    namespace = ("test", "documents")
    value = {"title": "Test Document", "content": "Hello, World!"}
    await call(store, "put", namespace, "doc1", value)
    item = await call(store, "get", namespace, "doc1")
    assert isinstance(item, Item)
    assert (item.namespace, item.key, item.value) == (namespace, "doc1", value)
    assert item.created_at == item.updated_at
    updated = {"title": "Updated Document", "content": "Hello, Updated!"}
    await call(store, "put", namespace, "doc1", updated)
    again = await call(store, "get", namespace, "doc1")
    assert again.value == updated
    assert again.updated_at > item.updated_at
    # created_at is kept by an update (documented: InMemoryStore resets it)
    assert again.created_at == item.created_at
    assert await call(store, "get", ("test", "other_documents"), "doc1") is None
    assert await call(store, "get", namespace, "doc2") is None
    await call(store, "delete", namespace, "doc1")
    assert await call(store, "get", namespace, "doc1") is None
    await call(store, "delete", namespace, "doc1")  # deleting what is gone does nothing
    await call(store, "delete", ("never",), "k")
    assert await call(store, "list_namespaces") == []


# langgraph-redis test_async_store.py::test_async_store_with_memory_persistence: a second
# store on the same server and prefix reads what the first wrote
@KINDS
async def test_a_second_store_reads_what_the_first_wrote(server_url: str, kind: str) -> None:
    async with open_store(server_url, kind) as first:
        await call(first, "put", ("test", "persistence"), "item", {"data": "persist_me", "t": 0.5})
        async with open_store(server_url, kind, prefix=first.config.prefix) as other:
            got = await call(other, "get", ("test", "persistence"), "item")
            assert got.value == {"data": "persist_me", "t": 0.5}
            await call(other, "delete", ("test", "persistence"), "item")
        assert await call(first, "get", ("test", "persistence"), "item") is None


# ---- search: prefix, filters, limit and offset --------------------------------------------


# postgres test_store.py::test_search, langgraph-redis test_store.py::test_search,
# test_async_store.py::test_search
async def test_search(store: Store) -> None:
    model = InMemoryStore()
    rows = [
        (
            ("test", "docs"),
            "doc1",
            {"title": "First Doc", "author": "Alice", "tags": ["important"]},
        ),
        (("test", "docs"), "doc2", {"title": "Second Doc", "author": "Bob", "tags": ["draft"]}),
        (("test", "images"), "img1", {"title": "Image 1", "author": "Alice", "tags": ["final"]}),
    ]
    await put_both(store, model, rows)
    # (a list as the prefix, as the upstream tests pass it)
    assert shape(await call(store, "search", ["test"])) == rows[::-1]
    assert shape(model.search(("test",))) == rows
    assert keys(await call(store, "search", ["test", "docs"])) == ["doc2", "doc1"]
    assert keys(await call(store, "search", ["test"], filter={"author": "Alice"})) == [
        "img1",
        "doc1",
    ]
    assert keys(await call(store, "search", ["test"], limit=2)) == ["img1", "doc2"]
    assert keys(await call(store, "search", ["test"], offset=2)) == ["doc1"]
    assert all(i.score is None for i in await call(store, "search", ["test"]))
    for namespace, key, _ in rows:
        await call(store, "delete", namespace, key)
    assert await call(store, "search", ["test"]) == []


FILTER_ROWS = [
    ("k1", {"n": 9, "s": "x", "d": {"e": 1, "f": "g"}, "l": [1, 2], "flag": True}),
    ("k2", {"n": 10, "s": "y", "d": {"e": 2}, "l": [2, 1], "flag": False, "opt": None}),
    ("k3", {"n": 11.5, "s": "x", "d": {"e": 1}, "l": [1, 2, 3], "flag": True}),
    ("k4", {"n": "10", "s": "z", "d": "flat", "l": [1, 2]}),
]


# libs/checkpoint tests test_store.py::test_vector_search_with_filters (its filters without
# the query), test_async_batch_store_deduplication (filter {"value": 2}); postgres
# test_store_filter_condition.py::test_numeric_operators_use_numeric_cast and
# test_store_filter_conditions.py::test_numeric_filter_conditions_use_numeric_comparison
# (9 is not >= 10); unit/test_store_filter_conditions.py::test_equality_ops_unchanged
@pytest.mark.parametrize(
    ("filter", "expected"),
    [
        ({"s": "x"}, ["k3", "k1"]),
        ({"s": {"$eq": "x"}}, ["k3", "k1"]),
        ({"s": {"$ne": "x"}}, ["k4", "k2"]),
        ({"n": {"$gt": 10}}, ["k3"]),
        ({"n": {"$gte": 10}}, ["k4", "k3", "k2"]),
        ({"n": {"$lt": 10}}, ["k1"]),
        ({"n": {"$lte": 10}}, ["k4", "k2", "k1"]),
        ({"n": {"$gt": 9, "$lt": 11}}, ["k4", "k2"]),
        ({"n": 10}, ["k2"]),
        ({"d": {"e": 1}}, ["k3", "k1"]),
        ({"d": {"e": 1, "f": "g"}}, ["k1"]),
        ({"d": {"e": {"$gte": 2}}}, ["k2"]),
        ({"d": "flat"}, ["k4"]),
        ({"l": [1, 2]}, ["k4", "k1"]),
        ({"l": [2, 1]}, ["k2"]),
        ({"flag": True}, ["k3", "k1"]),
        ({"flag": False}, ["k2"]),
        ({"opt": None}, ["k4", "k3", "k2", "k1"]),
        ({"opt": {"$ne": None}}, []),
        ({"s": "x", "n": {"$gt": 10}}, ["k3"]),
        ({"missing": "x"}, []),
        ({}, ["k4", "k3", "k2", "k1"]),
    ],
)
async def test_search_filters(store: Store, filter: dict[str, Any], expected: list[str]) -> None:
    """Every operator, nested values and lists. A number in a string ("10") compares as a
    number under $gt/$gte/$lt/$lte, as in InMemoryStore, whose comparison code this store
    uses (docs/store.md; PostgresStore compares only JSON numbers numerically)."""
    model = InMemoryStore()
    await put_both(
        store, model, [(("f", str(n % 2)), k, v) for n, (k, v) in enumerate(FILTER_ROWS)]
    )
    got = await call(store, "search", ("f",), filter=filter)
    assert keys(got) == expected
    assert sorted(shape(got)) == sorted(shape(model.search(("f",), filter=filter)))


# postgres test_store_filter_condition.py::test_unsupported_operator_raises,
# unit/test_store_filter_conditions.py::test_unsupported_operator_raises
async def test_an_unsupported_operator_raises(store: Store) -> None:
    await call(store, "put", ("f",), "k", {"n": 1})
    for op in ("$regex", "$in", "$foo"):
        with pytest.raises(ValueError) as ours:
            await call(store, "search", ("f",), filter={"n": {op: 1}})
        model = InMemoryStore()
        model.put(("f",), "k", {"n": 1})
        with pytest.raises(ValueError) as theirs:
            model.search(("f",), filter={"n": {op: 1}})
        assert str(ours.value) == str(theirs.value) == f"Unsupported operator: {op}"


# postgres test_store.py::test_search (limit/offset), libs/checkpoint tests test_store.py::
# test_vector_search_pagination (its windows without a query)
async def test_search_limit_and_offset(store: Store) -> None:
    model = InMemoryStore()
    rows = [((("p", "a"), ("p", "b"), ("p",))[n % 3], f"k{n}", {"n": n}) for n in range(8)]
    await put_both(store, model, rows)
    newest_first = [f"k{n}" for n in range(7, -1, -1)]
    for limit, offset in [(0, 0), (1, 0), (3, 2), (10, 5), (2, 7), (5, 8), (5, 100)]:
        got = await call(store, "search", ("p",), limit=limit, offset=offset)
        assert keys(got) == newest_first[offset : offset + limit]
    # the same items as InMemoryStore's, in the documented order
    full = await call(store, "search", ("p",), limit=100)
    assert sorted(shape(full)) == sorted(shape(model.search(("p",), limit=100)))
    even = await call(store, "search", ("p",), filter={"n": {"$lt": 6}}, limit=2, offset=1)
    assert keys(even) == ["k4", "k3"]
    assert await call(store, "search", ("q",), limit=10) == []


# postgres test_store.py::test_search_namespace_segment_boundary,
# test_search_empty_prefix_is_unconstrained, test_search_namespace_like_metacharacters
async def test_search_prefix_stops_at_label_boundaries(store: Store) -> None:
    model = InMemoryStore()
    namespaces = [
        ("foo",),
        ("foo", "child"),
        ("foo", "child", "deep"),
        ("foobar",),
        ("foobar", "baz"),
        ("foo2",),
        ("foo-1",),  # "-", "!" and " " sort before ".": in the index range of "foo"
        ("foo!",),
        ("foo ",),
        ("user_1",),
        ("user_1", "child"),
        ("userX1",),
        ("a%b",),
        ("axxb",),
        ("a*b",),
        ("[x]",),
        ("{x}", "}"),
    ]
    await put_both(store, model, [(n, "k", {"v": 1}) for n in namespaces])

    async def found(prefix: tuple[str, ...]) -> set[tuple[str, ...]]:
        got = {tuple(i.namespace) for i in await call(store, "search", prefix, limit=100)}
        assert got == {tuple(i.namespace) for i in model.search(prefix, limit=100)}
        return got

    assert await found(("foo",)) == {("foo",), ("foo", "child"), ("foo", "child", "deep")}
    assert await found(("foobar",)) == {("foobar",), ("foobar", "baz")}
    assert await found(("foo", "child")) == {("foo", "child"), ("foo", "child", "deep")}
    assert await found(("foo2",)) == {("foo2",)}
    assert await found(("foo-1",)) == {("foo-1",)}
    assert await found(("fo",)) == set()
    assert await found(()) == set(namespaces)
    assert await found(("user_1",)) == {("user_1",), ("user_1", "child")}
    assert await found(("a%b",)) == {("a%b",)}
    assert await found(("a*b",)) == {("a*b",)}
    assert await found(("[x]",)) == {("[x]",)}
    assert await found(("{x}",)) == {("{x}", "}")}
    # a "*" in a search prefix is a label, not a wildcard (as InMemoryStore)
    assert await found(("*",)) == set()


# ---- list_namespaces ---------------------------------------------------------------------

BASIC_NAMESPACES = [
    ("a", "b", "c"),
    ("a", "b", "d", "e"),
    ("a", "b", "d", "i"),
    ("a", "b", "f"),
    ("a", "c", "f"),
    ("b", "a", "f"),
    ("users", "123"),
    ("users", "456", "settings"),
    ("admin", "users", "789"),
]


# libs/checkpoint tests test_store.py::test_list_namespaces_basic, test_list_namespaces_
# with_wildcards, test_list_namespaces_max_depth, test_list_namespaces_no_conditions,
# test_list_namespaces_empty_store; postgres test_store.py::test_list_namespaces,
# langgraph-redis test_store.py::test_list_namespaces
@pytest.mark.parametrize(
    "args",
    [
        {},
        {"prefix": ("a", "b")},
        {"suffix": ("f",)},
        {"prefix": ("a",), "suffix": ("f",)},
        {"prefix": ("a", "b"), "max_depth": 3},
        {"prefix": ("a", "b"), "limit": 2},
        {"prefix": ("a", "b"), "offset": 2},
        {"prefix": ("a", "*", "f")},
        {"suffix": ("*", "f")},
        {"prefix": ("nonexistent",)},
        {"prefix": ("users", "123")},
        {"prefix": ("users", "*")},
        {"suffix": ("*", "settings")},
        {"prefix": ("*", "users"), "suffix": ("*", "settings")},
        {"prefix": ("*", "users")},
        {"prefix": ("*",), "max_depth": 1},
        {"max_depth": 2},
        {"max_depth": 2, "limit": 3, "offset": 2},
        {"prefix": ["a"], "suffix": ["f"]},
        {"prefix": ("a", "b", "c", "d")},
        {"suffix": ("a", "b", "c", "d", "e")},
    ],
)
async def test_list_namespaces_as_inmemorystore(store: Store, args: dict[str, Any]) -> None:
    model = InMemoryStore()
    assert await call(store, "list_namespaces", **args) == model.list_namespaces(**args) == []
    await put_both(store, model, [(n, f"id_{i}", {"i": i}) for i, n in enumerate(BASIC_NAMESPACES)])
    got = await call(store, "list_namespaces", **args)
    assert got == model.list_namespaces(**args)
    assert all(isinstance(n, tuple) for n in got)


async def test_list_namespaces_exact_answers(store: Store) -> None:
    """A few answers written out (the parametrized test above compares them with
    InMemoryStore's): sorted, depth-cut and deduplicated, wildcards of one label."""
    for i, namespace in enumerate(BASIC_NAMESPACES):
        await call(store, "put", namespace, f"id_{i}", {"i": i})
    assert await call(store, "list_namespaces", prefix=("a", "b"), max_depth=3) == [
        ("a", "b", "c"),
        ("a", "b", "d"),
        ("a", "b", "f"),
    ]
    assert await call(store, "list_namespaces", suffix=("*", "f")) == [
        ("a", "b", "f"),
        ("a", "c", "f"),
        ("b", "a", "f"),
    ]
    assert await call(store, "list_namespaces", max_depth=1) == [
        ("a",),
        ("admin",),
        ("b",),
        ("users",),
    ]
    assert await call(store, "list_namespaces", prefix=("a", "b"), limit=2, offset=1) == [
        ("a", "b", "d", "e"),
        ("a", "b", "d", "i"),
    ]


# libs/checkpoint tests test_store.py::test_list_namespaces_pagination
async def test_list_namespaces_pagination(store: Store) -> None:
    for i in range(20):
        await call(store, "put", ("namespace", f"sub_{i:02d}"), f"id_{i:02d}", {"i": i})
    for offset in (0, 5, 15, 18, 20):
        assert await call(
            store, "list_namespaces", prefix=("namespace",), limit=5, offset=offset
        ) == [("namespace", f"sub_{i:02d}") for i in range(offset, min(offset + 5, 20))]


# postgres test_store.py::test_list_namespaces_segment_boundary,
# test_namespace_labels_with_trailing_newline
async def test_list_namespaces_stops_at_label_boundaries(store: Store) -> None:
    model = InMemoryStore()
    namespaces = [
        ("foo",),
        ("foo", "child"),
        ("foobar",),
        ("foobar", "baz"),
        ("foo-1",),
        ("uid", "users", "alice"),
        ("uid", "users", "malice"),
        ("uid", "a", "b", "alice"),
        ("users", "alice"),
        ("users", "alice\n"),
    ]
    await put_both(store, model, [(n, "k", {"v": 1}) for n in namespaces])
    cases = [
        ({"prefix": ["foo"]}, [("foo",), ("foo", "child")]),
        (
            {"suffix": ["alice"]},
            [("uid", "a", "b", "alice"), ("uid", "users", "alice"), ("users", "alice")],
        ),
        ({"prefix": ["uid", "*", "alice"]}, [("uid", "users", "alice")]),
        (
            {"prefix": ["uid"]},
            [("uid", "a", "b", "alice"), ("uid", "users", "alice"), ("uid", "users", "malice")],
        ),
        ({"prefix": ["users", "alice"]}, [("users", "alice")]),
        ({"suffix": ["alice\n"]}, [("users", "alice\n")]),
    ]
    for args, expected in cases:
        assert await call(store, "list_namespaces", limit=100, **args) == expected
        assert model.list_namespaces(limit=100, **args) == expected


# (InMemoryStore lists a namespace whose items were all deleted; this store lists the
# namespaces holding items, as PostgresStore, whose rows go: docs/store.md, Key layout)
async def test_a_namespace_emptied_is_not_listed(store: Store) -> None:
    await call(store, "put", ("a", "b"), "k", {"v": 1})
    await call(store, "put", ("a", "c"), "k", {"v": 1})
    await call(store, "delete", ("a", "b"), "k")
    assert await call(store, "list_namespaces") == [("a", "c")]
    assert await call(store, "list_namespaces", max_depth=1) == [("a",)]
    await call(store, "delete", ("a", "c"), "k")
    assert await call(store, "list_namespaces", max_depth=1) == []


# ---- values and keys ---------------------------------------------------------------------


# libs/checkpoint tests test_store.py::test_non_ascii, postgres test_store.py::test_non_ascii
# (its texts, here as keys, labels and values; the semantic half is in ..._semantic.py)
async def test_unicode_keys_labels_and_values(store: Store) -> None:
    model = InMemoryStore()
    rows = [
        (("user_123", "memories"), "1", {"text": "这是中文"}),
        (("user_123", "memories"), "2", {"text": "これは日本語です"}),
        (("user_123", "memories"), "3", {"text": "이건 한국어야"}),
        (("user_123", "memories"), "4", {"text": "Это русский"}),
        (("user_123", "memories"), "5", {"text": "यह रूसी है"}),
        (("用户", "мемори", "🙂"), "ключ-🔑", {"é": "ß", "q": '"\\\n\t\u0000', "n": [1.5, -2]}),
        (("用户", "мемори"), "a.b c/d:e{f}", {"key": "keys may hold periods and braces"}),
    ]
    await put_both(store, model, rows)
    for namespace, key, value in rows:
        got = await call(store, "get", namespace, key)
        assert one(got) == one(model.get(namespace, key)) == (namespace, key, value)
    assert keys(await call(store, "search", ("user_123",), filter={"text": "Это русский"})) == ["4"]
    assert shape(await call(store, "search", ("用户",))) == rows[:4:-1]
    assert await call(store, "list_namespaces", prefix=("用户",)) == [
        ("用户", "мемори"),
        ("用户", "мемори", "🙂"),
    ]
    assert await call(store, "list_namespaces", suffix=("🙂",)) == [("用户", "мемори", "🙂")]


# (large values: the upstream large-batch tests put many small items; here one item is large)
async def test_large_values(store: Store) -> None:
    nested: dict[str, Any] = {"leaf": "end"}
    for depth in range(60):
        nested = {"level": depth, "child": nested}
    value = {"blob": "x" * 2_000_000, "numbers": list(range(20_000)), "nested": nested}
    await call(store, "put", ("big",), "k", value)
    got = await call(store, "get", ("big",), "k")
    assert got.value == value
    found = await call(store, "search", ("big",), filter={"nested": {"level": 59}})
    assert [(i.key, i.value == value) for i in found] == [("k", True)]


# ---- ordering ----------------------------------------------------------------------------


# postgres test_postgres_deterministic_ordering.py (its saver checkpoints of one timestamp,
# ordered by insertion): items stamped alike come in one order, every time. Within a
# namespace a put is stamped above the newest item, so the newest put comes first; across
# namespaces a tie goes to the namespace that sorts first (docs/store.md, TTL: server time)
async def test_items_stamped_alike_come_in_a_fixed_order(store: Store) -> None:
    store.config.clock = lambda: 1_900_000_000_000  # every put at the same ms
    for namespace, key in [
        (("b",), "k"),
        (("a",), "k"),
        (("c",), "k"),
        (("a",), "k2"),
        (("b",), "k2"),
    ]:
        await call(store, "put", namespace, key, {"v": key})
    order = [("a",), ("b",), ("a",), ("b",), ("c",)]
    for _ in range(3):
        found = await call(store, "search", (), limit=10)
        assert [(tuple(i.namespace), i.key) for i in found] == list(
            zip(order, ["k2", "k2", "k", "k", "k"], strict=True)
        )
    page = await call(store, "search", (), limit=2, offset=1)
    assert [(tuple(i.namespace), i.key) for i in page] == [(("b",), "k2"), (("a",), "k")]
    assert [i.updated_at.timestamp() for i in found] == [1_900_000_000.000001] * 2 + [
        1_900_000_000.0
    ] * 3


# ---- concurrency -------------------------------------------------------------------------


# postgres test_async_store.py::test_large_batches_async, langgraph-redis test_async_store.py::
# test_large_batches (fewer ops: the point is many concurrent calls, each its own batch)
async def test_many_concurrent_async_calls(server_url: str) -> None:
    async with open_store(server_url, "async") as store:
        namespaces = [("test", "foo", "bar", "baz", str(m % 2)) for m in range(4)]
        await asyncio.gather(
            *(store.aput(n, f"key{i}", {"foo": f"bar{i}"}) for n in namespaces for i in range(25))
        )
        results = await asyncio.gather(
            *(store.aget(n, f"key{i}") for n in namespaces for i in range(25)),
            *(store.alist_namespaces(prefix=None, max_depth=m + 1) for m in range(5)),
            *(store.asearch(("test",), limit=10) for _ in range(5)),
        )
        gets, lists, searches = results[:100], results[100:105], results[105:]
        assert [g.value for g in gets] == [
            {"foo": f"bar{i}"} for _ in namespaces for i in range(25)
        ]
        assert lists == [
            [("test",)],
            [("test", "foo")],
            [("test", "foo", "bar")],
            [("test", "foo", "bar", "baz")],
            [("test", "foo", "bar", "baz", "0"), ("test", "foo", "bar", "baz", "1")],
        ]
        assert all(len(s) == 10 for s in searches)
        await asyncio.gather(*(store.adelete(n, f"key{i}") for n in namespaces for i in range(25)))
        assert await store.asearch(("test",)) == []


# postgres test_async_store.py::test_large_batches (sync calls from a thread pool on the
# async store) and test_no_running_loop
async def test_sync_calls_on_the_async_store(server_url: str) -> None:
    async with open_store(server_url, "async") as store:
        assert isinstance(store, AsyncRedisStore)
        await store.alist_namespaces()  # (the store learns its loop)
        for method, args in [
            (store.put, (("foo", "bar"), "baz", {"val": "baz"})),
            (store.delete, (("foo", "bar"), "baz")),
            (store.search, (("foo", "bar"),)),
            (store.list_namespaces, ()),
            (store.batch, ([PutOp(("foo", "bar"), "baz", {"val": "baz"})],)),
        ]:
            with pytest.raises(asyncio.InvalidStateError):
                method(*args)  # type: ignore[operator]
        with ThreadPoolExecutor(max_workers=4) as pool:
            puts = [
                pool.submit(store.put, ("test", str(m % 2)), f"key{i}", {"foo": f"bar{i}"})
                for m in range(2)
                for i in range(20)
            ]
            await asyncio.gather(*(asyncio.wrap_future(f) for f in puts))
            reads = [pool.submit(store.get, ("test", str(i % 2)), f"key{i}") for i in range(20)]
            reads.append(pool.submit(store.list_namespaces, prefix=("test",)))
            reads.append(pool.submit(store.search, ("test",), limit=100))
            got = await asyncio.gather(*(asyncio.wrap_future(f) for f in reads))
        assert [g.value for g in got[:20]] == [{"foo": f"bar{i}"} for i in range(20)]
        assert got[20] == [("test", "0"), ("test", "1")]
        assert len(got[21]) == 40
        assert (await store.aget(("foo", "bar"), "baz")) is None  # nothing went in
