"""RedisStore against InMemoryStore: random ops, answers compared after every step.

InMemoryStore returns search results in insertion order; this store (like PostgresStore)
returns them newest-updated first. The reference is therefore InMemoryStore's full answer
re-ordered by the step of each item's last put, then cut by offset and limit.

With an index (VectorDifferential), a search with a query is compared the same way: the
scored items of InMemoryStore's full answer, best first (ties newest-put first), then its
unscored ones newest-put first, cut by offset and limit. The embedder's vectors are small
integers, exact in float32, so both stores compute the same scores bit for bit. A put
replaces an item's vectors here (see docs/store.md): the model's are dropped before each
put.

ServerVectorDifferential is VectorDifferential on a Redis Stack with the store's
``vector_search="server"``: its searches are the server's KNN plus the store's exact scoring,
compared bit for bit the same way."""

from __future__ import annotations

import asyncio
import hashlib
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule
from langgraph.store.memory import InMemoryStore

from langgraph.store.rediskv import AsyncRedisStore, RedisStore, listing, semantic
from langgraph.store.rediskv import search as search_module

from ..conftest import new_prefix

LABELS = st.sampled_from(["a", "b", "c", "a-b", "ab"])
# few namespaces, so that they hold several items each (the order within one is tested too)
NAMESPACES = st.one_of(
    st.lists(st.sampled_from(["a", "b", "a-b"]), min_size=1, max_size=2).map(tuple),
    st.lists(LABELS, min_size=1, max_size=3).map(tuple),
)
PREFIXES = st.lists(LABELS, min_size=0, max_size=2).map(tuple)
KEYS = st.sampled_from(["k1", "k2", "k3", "k4"])
VALUES = st.fixed_dictionaries(
    {"n": st.integers(-3, 3), "s": st.sampled_from(["x", "y"])},
    optional={"d": st.fixed_dictionaries({"e": st.integers(0, 2)}), "l": st.just([1, 2])},
)
FILTERS = st.one_of(
    st.none(),
    st.fixed_dictionaries({"s": st.sampled_from(["x", "y"])}),
    st.fixed_dictionaries(
        {
            "n": st.sampled_from(["$gt", "$gte", "$lt", "$lte", "$eq", "$ne"]).flatmap(
                lambda o: st.fixed_dictionaries({o: st.integers(-3, 3)})
            )
        }
    ),
    st.fixed_dictionaries({"d": st.fixed_dictionaries({"e": st.integers(0, 2)})}),
    st.fixed_dictionaries({"l": st.just([1, 2])}),
)


def shape(items: list[Any]) -> list[tuple[tuple[str, ...], str, dict[str, Any]]]:
    return [(tuple(i.namespace), i.key, i.value) for i in items]


SEARCH_HEADS_FROM = search_module.SEARCH_HEADS_FROM
LISTING_STEP_MIN = listing.LISTING_STEP_MIN
SERVER: list[str] = []  # the suite's server (a state machine takes no fixture)
STACK: list[str] = []  # a Redis Stack's, for ServerVectorDifferential


@pytest.fixture(autouse=True)
def suite_server(server_url: str, request: pytest.FixtureRequest) -> None:
    SERVER[:] = [server_url]
    if "ServerVector" in request.node.nodeid:
        STACK[:] = [request.getfixturevalue("stack_url")]


class Differential(RuleBasedStateMachine):
    asynchronous = False

    on_server = False  # the server's vector search (a Redis Stack), else the client's

    def make_store(self, **options: Any) -> Any:
        """The store under test, on the suite's server, or on a Redis Stack when it is to
        search on the server's vector search (the cluster's machines, in
        tests/cluster/test_cluster_store.py, make theirs on the cluster)."""
        url = STACK[0] if self.on_server else SERVER[0]
        if self.asynchronous:
            self.loop = asyncio.new_event_loop()
            return AsyncRedisStore(url=url, prefix=new_prefix(), **options)
        return RedisStore(url=url, prefix=new_prefix(), **options)

    @initialize()
    def start(self) -> None:
        self.model = InMemoryStore()
        self.store: Any = self.make_store()
        self.step = 0
        self.last_put: dict[tuple[tuple[str, ...], str], int] = {}

    def call(self, name: str, *args: Any, **kwargs: Any) -> Any:
        if self.asynchronous:
            return self.loop.run_until_complete(getattr(self.store, "a" + name)(*args, **kwargs))
        return getattr(self.store, name)(*args, **kwargs)

    def teardown(self) -> None:
        search_module.SEARCH_HEADS_FROM = SEARCH_HEADS_FROM
        listing.LISTING_STEP_MIN = LISTING_STEP_MIN
        if hasattr(self, "store"):
            if self.asynchronous:
                self.loop.run_until_complete(self.store.aclose())
                self.loop.close()
            else:
                self.store.close()

    @rule(namespace=NAMESPACES, key=KEYS, value=VALUES)
    def put(self, namespace: tuple[str, ...], key: str, value: dict[str, Any]) -> None:
        self.step += 1
        self.model._vectors[namespace].pop(key, None)  # a put replaces the vectors
        self.model.put(namespace, key, value)
        self.call("put", namespace, key, value)
        self.last_put[(namespace, key)] = self.step

    @rule(
        heads_from=st.sampled_from([0, 1, 2, SEARCH_HEADS_FROM]),
        listing_step=st.sampled_from([1, 2, 3, LISTING_STEP_MIN]),
    )
    def step_sizes(self, heads_from: int, listing_step: int) -> None:
        """How many namespaces a search pages at once before it reads their heads first
        (search.plain_search: 0, every search over a prefix takes the heads' path), and the least
        step of a listing through the index (listing.listing_step: small ones end steps at every
        namespace)."""
        search_module.SEARCH_HEADS_FROM = heads_from
        listing.LISTING_STEP_MIN = listing_step

    @rule(namespace=NAMESPACES, key=KEYS)
    def delete(self, namespace: tuple[str, ...], key: str) -> None:
        self.model.delete(namespace, key)
        self.call("delete", namespace, key)

    @rule(namespace=NAMESPACES, key=KEYS)
    def get(self, namespace: tuple[str, ...], key: str) -> None:
        want = self.model.get(namespace, key)
        got = self.call("get", namespace, key)
        assert (None if got is None else (tuple(got.namespace), got.key, got.value)) == (
            None if want is None else (tuple(want.namespace), want.key, want.value)
        )

    @rule(prefix=PREFIXES, filter=FILTERS, limit=st.integers(0, 6), offset=st.integers(0, 4))
    def search(
        self, prefix: tuple[str, ...], filter: dict[str, Any] | None, limit: int, offset: int
    ) -> None:
        every = self.model.search(prefix, filter=filter, limit=10_000)
        every.sort(key=lambda i: -self.last_put[(tuple(i.namespace), i.key)])
        got = self.call("search", prefix, filter=filter, limit=limit, offset=offset)
        assert shape(got) == shape(every[offset : offset + limit])
        assert all(i.score is None for i in got)

    @rule(
        prefix=st.one_of(
            st.none(), st.lists(LABELS, min_size=1, max_size=2).map(tuple), st.just(("a", "*"))
        ),
        suffix=st.one_of(st.none(), st.lists(LABELS, min_size=1, max_size=2).map(tuple)),
        max_depth=st.one_of(st.none(), st.integers(1, 3)),
        limit=st.integers(1, 8),
        offset=st.integers(0, 3),
    )
    def list_namespaces(
        self,
        prefix: tuple[str, ...] | None,
        suffix: tuple[str, ...] | None,
        max_depth: int | None,
        limit: int,
        offset: int,
    ) -> None:
        args = {"prefix": prefix, "suffix": suffix, "max_depth": max_depth}
        args |= {"limit": limit, "offset": offset}
        # InMemoryStore lists a namespace whose items were all deleted: ask it for the live ones
        live = {n for n, items in self.model._data.items() if items}
        want = [
            n
            for n in self.model.list_namespaces(**{**args, "limit": 10_000, "offset": 0})
            if max_depth is not None or n in live
        ]
        if max_depth is not None:
            depths = {
                n[:max_depth]
                for n in live
                if n in self.model.list_namespaces(prefix=prefix, suffix=suffix, limit=10_000)
            }
            want = sorted(depths)
        assert self.call("list_namespaces", **args) == want[offset : offset + limit]

    @invariant()
    def whole_listing(self) -> None:
        if hasattr(self, "store"):
            live = sorted(n for n, items in self.model._data.items() if items)
            assert self.call("list_namespaces", limit=10_000) == live


WORDS = ["tea", "green tea", "coffee", "water", "juice", "milk", "soda", "wine"]
VECTOR_VALUES = st.fixed_dictionaries(
    {"n": st.integers(-3, 3)},
    optional={
        "text": st.sampled_from(WORDS),
        "tags": st.lists(st.sampled_from(WORDS), min_size=1, max_size=2, unique=True),
    },
    # InMemoryStore raises on a text embedded twice in one batch (its own defect)
).filter(lambda v: v.get("text") not in v.get("tags", []))
INDEXES = st.sampled_from([None, None, False, ["text"], ["tags[*]"], ["missing"], ["$"]])
# fewer namespaces than the plain machine's: items are put again more often
VECTOR_NAMESPACES = st.sampled_from([("a",), ("b",), ("a", "b")])


def fake_vector(text: str) -> list[float]:
    """8 small integers from a hash of the text: deterministic, exact in float32."""
    return [float(b % 17 - 8) for b in hashlib.sha256(text.encode()).digest()[:8]]


def fake_embed(texts: list[str]) -> list[list[float]]:
    return [fake_vector(t) for t in texts]


VECTOR_INDEX = {"dims": 8, "embed": fake_embed, "fields": ["text", "tags[*]"]}


class VectorDifferential(Differential):
    """The same machine on stores with an index: puts embed, searches may have a query.
    The listing and get rules are left to the plain machine (a step here is more often a
    put or a search)."""

    list_namespaces = None  # type: ignore[assignment]
    get = None  # type: ignore[assignment]

    @initialize()
    def start(self) -> None:
        self.model = InMemoryStore(index=VECTOR_INDEX)  # type: ignore[arg-type]
        if self.on_server:
            self.store = self.make_store(index=VECTOR_INDEX, vector_search="server")
        else:
            self.store = self.make_store(index=VECTOR_INDEX)
        self.step = 0
        self.last_put = {}

    @rule(namespace=VECTOR_NAMESPACES, key=KEYS, value=VECTOR_VALUES, index=INDEXES)
    def put_embedded(
        self,
        namespace: tuple[str, ...],
        key: str,
        value: dict[str, Any],
        index: Any,
    ) -> None:
        self.step += 1
        self.model._vectors[namespace].pop(key, None)  # a put replaces the vectors
        self.model.put(namespace, key, value, index=index)
        self.call("put", namespace, key, value, index=index)
        self.last_put[(namespace, key)] = self.step

    @rule(
        prefix=st.sampled_from([(), ("a",), ("b",)]),
        query=st.sampled_from([*WORDS, "hot drink"]),
        filter=st.one_of(st.none(), st.fixed_dictionaries({"n": st.just({"$gte": 0})})),
        limit=st.integers(0, 6),
        offset=st.integers(0, 4),
    )
    def vector_search(
        self,
        prefix: tuple[str, ...],
        query: str,
        filter: dict[str, Any] | None,
        limit: int,
        offset: int,
    ) -> None:
        every = self.model.search(prefix, query=query, filter=filter, limit=10_000)
        newest = {id(i): -self.last_put[(tuple(i.namespace), i.key)] for i in every}
        scored = sorted((i for i in every if i.score is not None), key=lambda i: newest[id(i)])
        scored.sort(key=lambda i: -(i.score or 0.0))  # (stable: ties stay newest first)
        scoreless = sorted((i for i in every if i.score is None), key=lambda i: newest[id(i)])
        want = (scored + scoreless)[offset : offset + limit]
        got = self.call("search", prefix, query=query, filter=filter, limit=limit, offset=offset)
        assert [(*s, i.score) for s, i in zip(shape(got), got, strict=True)] == [
            (*s, i.score) for s, i in zip(shape(want), want, strict=True)
        ]
        if self.on_server and limit:
            assert self.store.config.server_search


SETTINGS = settings(
    max_examples=40,
    stateful_step_count=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)


class AsyncDifferential(Differential):
    asynchronous = True


TestDifferential = Differential.TestCase
TestDifferential.settings = SETTINGS
TestAsyncDifferential = AsyncDifferential.TestCase
TestAsyncDifferential.settings = SETTINGS


class AsyncVectorDifferential(VectorDifferential):
    asynchronous = True


VECTOR_SETTINGS = settings(SETTINGS, max_examples=60, stateful_step_count=40)
TestVectorDifferential = VectorDifferential.TestCase
TestVectorDifferential.settings = VECTOR_SETTINGS
TestAsyncVectorDifferential = AsyncVectorDifferential.TestCase
TestAsyncVectorDifferential.settings = VECTOR_SETTINGS


class ServerVectorDifferential(VectorDifferential):
    """With a first KNN of K = 2 (offset + limit) here rather than at least 32, so that the
    searches ask again for more (the store holds a dozen vectors at most)."""

    on_server = True

    @initialize()
    def start(self) -> None:
        super().start()
        self.knn_min, semantic.KNN_MIN = semantic.KNN_MIN, 1

    def teardown(self) -> None:
        if hasattr(self, "knn_min"):
            semantic.KNN_MIN = self.knn_min
        super().teardown()


class AsyncServerVectorDifferential(ServerVectorDifferential):
    asynchronous = True


# (fewer examples: the Redis Stack lane runs in both CI lanes)
TestServerVectorDifferential = ServerVectorDifferential.TestCase
TestServerVectorDifferential.settings = settings(VECTOR_SETTINGS, max_examples=40)
TestAsyncServerVectorDifferential = AsyncServerVectorDifferential.TestCase
TestAsyncServerVectorDifferential.settings = settings(VECTOR_SETTINGS, max_examples=15)


@pytest.mark.parametrize("size", [0])
def test_module_imports(size: int) -> None:
    assert RedisStore.supports_ttl and AsyncRedisStore.supports_ttl


def test_search_is_newest_updated_first_within_and_across_namespaces(server_url: str) -> None:
    with RedisStore.from_conn_string(server_url, prefix=new_prefix()) as store:
        for namespace, key in [(("a",), "k1"), (("a", "b"), "k2"), (("a",), "k3"), (("c",), "k4")]:
            store.put(namespace, key, {"v": key})
        store.put(("a", "b"), "k2", {"v": "again"})  # an update moves the item to the front
        found = store.search(("a",), limit=10)
        assert [(tuple(i.namespace), i.key) for i in found] == [
            (("a", "b"), "k2"),
            (("a",), "k3"),
            (("a",), "k1"),
        ]
        assert [i.key for i in store.search(("a",), limit=1, offset=1)] == ["k3"]
        assert [i.key for i in store.search((), filter={"v": {"$ne": "k3"}}, limit=10)] == [
            "k2",
            "k4",
            "k1",
        ]
