"""Semantic search (``index=``): exact values with known vectors, the embedders LangGraph
accepts, bad configs and bad vectors refused with nothing stored lost, vectors going with
their items (re-put, delete, expiry), and a search over several pages."""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from typing import Any

import pytest
import redis
from langchain_core.embeddings import Embeddings
from langgraph.store.base import PutOp
from langgraph.store.memory import InMemoryStore

from langgraph.store import memory
from langgraph.store.rediskv import AsyncRedisStore, RedisStore, semantic, vectors
from langgraph.store.rediskv.keys import namespace_keys

from ..conftest import new_prefix

# known vectors: the scores of a query are plain numbers
VECTORS = {
    "tea": [1.0, 0.0, 0.0, 0.0],
    "coffee": [0.0, 1.0, 0.0, 0.0],
    "tea and coffee": [1.0, 1.0, 0.0, 0.0],
    "water": [0.0, 0.0, 1.0, 0.0],
    "hot drink": [1.0, 0.0, 0.0, 0.0],
    "zero": [0.0, 0.0, 0.0, 0.0],
}


class KnownEmbeddings(Embeddings):
    """A LangChain ``Embeddings`` that knows VECTORS, and counts its calls."""

    def __init__(self) -> None:
        self.documents: list[list[str]] = []
        self.queries: list[str] = []

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        self.documents.append(list(texts))
        return [VECTORS[t] for t in texts]

    def embed_query(self, text: str) -> list[float]:
        self.queries.append(text)
        return VECTORS[text]


def keyed(items: list[Any]) -> list[tuple[str, float | None]]:
    return [(i.key, i.score) for i in items]


@pytest.fixture
def embeddings() -> KnownEmbeddings:
    return KnownEmbeddings()


@pytest.fixture
def store(server_url: str, embeddings: KnownEmbeddings) -> Iterator[RedisStore]:
    index = {"dims": 4, "embed": embeddings, "fields": ["text"]}
    with RedisStore.from_conn_string(server_url, prefix=new_prefix(), index=index) as store:
        yield store


def test_a_query_ranks_by_cosine_with_an_embeddings_object(
    store: RedisStore, embeddings: KnownEmbeddings
) -> None:
    store.put(("docs",), "d1", {"text": "coffee"})
    store.put(("docs",), "d2", {"text": "tea and coffee"})
    store.put(("docs", "old"), "d3", {"text": "tea"})
    store.put(("docs",), "d4", {"text": "water"})
    store.put(("other",), "d5", {"text": "tea"})
    assert embeddings.documents == [["coffee"], ["tea and coffee"], ["tea"], ["water"], ["tea"]]
    found = store.search(("docs",), query="hot drink", limit=10)
    assert keyed(found) == [("d3", 1.0), ("d2", 1 / math.sqrt(2)), ("d4", 0.0), ("d1", 0.0)]
    assert embeddings.queries == ["hot drink"]
    assert [tuple(i.namespace) for i in found] == [("docs", "old"), ("docs",), ("docs",), ("docs",)]
    assert found[0].value == {"text": "tea"}
    assert found[0].created_at == found[0].updated_at
    # offset and limit over the ranking; a filter keeps its items only; no query: no score
    assert keyed(store.search(("docs",), query="hot drink", limit=2, offset=1)) == [
        ("d2", 1 / math.sqrt(2)),
        ("d4", 0.0),
    ]
    assert keyed(store.search((), query="hot drink", filter={"text": "tea"}, limit=5)) == [
        ("d5", 1.0),
        ("d3", 1.0),
    ]
    assert keyed(store.search(("docs",), limit=2)) == [("d4", None), ("d3", None)]


def test_items_without_vectors_follow_the_scored_ones(
    store: RedisStore, embeddings: KnownEmbeddings
) -> None:
    store.put(("n",), "no-text", {"title": "tea"})  # the field "text" is missing: no vector
    store.put(("n",), "not-indexed", {"text": "tea"}, index=False)
    store.put(("n",), "other-path", {"text": "tea", "title": "coffee"}, index=["title"])
    store.put(("n",), "missing-path", {"text": "tea"}, index=["nowhere"])
    store.put(("n",), "scored", {"text": "tea"})
    assert embeddings.documents == [["coffee"], ["tea"]]
    assert keyed(store.search(("n",), query="tea", limit=10)) == [
        ("scored", 1.0),
        ("other-path", 0.0),
        ("missing-path", None),
        ("not-indexed", None),
        ("no-text", None),
    ]
    # as InMemoryStore, with the same vectors: the scored items in the same order
    model = InMemoryStore(index={"dims": 4, "embed": KnownEmbeddings(), "fields": ["text"]})
    for key, value, index in [
        ("no-text", {"title": "tea"}, None),
        ("not-indexed", {"text": "tea"}, False),
        ("other-path", {"text": "tea", "title": "coffee"}, ["title"]),
        ("missing-path", {"text": "tea"}, ["nowhere"]),
        ("scored", {"text": "tea"}, None),
    ]:
        model.put(("n",), key, value, index=index)
    assert keyed(model.search(("n",), query="tea", limit=2)) == [
        ("scored", 1.0),
        ("other-path", 0.0),
    ]


def test_several_texts_of_an_item_score_it_by_the_best(server_url: str) -> None:
    index = {"dims": 4, "embed": KnownEmbeddings(), "fields": ["text", "tags[*]"]}
    with RedisStore.from_conn_string(server_url, prefix=new_prefix(), index=index) as store:
        store.put(("m",), "k1", {"text": "water", "tags": ["coffee", "tea and coffee"]})
        store.put(("m",), "k2", {"text": "coffee"})
        assert keyed(store.search(("m",), query="tea")) == [
            ("k1", 1 / math.sqrt(2)),
            ("k2", 0.0),
        ]
        # a text two items share is embedded once in a batch (InMemoryStore raises there)
        store.batch([PutOp(("m",), "k3", {"text": "tea"}), PutOp(("m",), "k4", {"text": "tea"})])
        assert keyed(store.search(("m",), query="tea", limit=2)) == [("k4", 1.0), ("k3", 1.0)]


def test_a_put_replaces_the_vectors_and_a_delete_drops_them(
    store: RedisStore, client: redis.Redis
) -> None:
    v_key = namespace_keys(store.config.prefix, ("r",))[5]
    store.put(("r",), "k", {"text": "tea"})
    # dims 4 (uint32), then float32 1, 0, 0, 0
    assert client.hget(v_key, "k") == b"\x04\x00\x00\x00" + b"\x00\x00\x80?" + b"\x00" * 12
    store.put(("r",), "k", {"text": "coffee"})
    assert keyed(store.search(("r",), query="tea")) == [("k", 0.0)]
    store.put(("r",), "k", {"text": "tea"}, index=False)  # the vectors of "coffee" go
    assert client.hget(v_key, "k") is None
    assert keyed(store.search(("r",), query="tea")) == [("k", None)]
    store.put(("r",), "k", {"text": "tea"})
    store.delete(("r",), "k")
    assert client.exists(v_key) == 0
    assert store.search(("r",), query="tea") == []


def test_an_expired_item_goes_with_its_vectors(server_url: str, client: redis.Redis) -> None:
    index = {"dims": 4, "embed": KnownEmbeddings(), "fields": ["text"]}
    with RedisStore.from_conn_string(server_url, prefix=new_prefix(), index=index) as store:
        now = [1_900_000_000_000]
        store.config.clock = lambda: now[0]
        v_key = namespace_keys(store.config.prefix, ("x",))[5]
        store.put(("x",), "short", {"text": "tea"}, ttl=1)
        store.put(("x",), "long", {"text": "coffee"}, ttl=10)
        now[0] += 60_000
        assert keyed(store.search(("x",), query="tea")) == [("long", 0.0)]
        assert client.hkeys(v_key) == [b"long"]


def test_a_vector_of_other_dims_is_refused_and_nothing_is_lost(
    store: RedisStore, client: redis.Redis
) -> None:
    VECTORS["short"] = [1.0, 0.0, 0.0]
    try:
        store.put(("d",), "k", {"text": "tea"})
        with pytest.raises(ValueError) as error:
            store.batch(
                [PutOp(("d",), "k2", {"text": "coffee"}), PutOp(("d",), "k", {"text": "short"})]
            )
        assert str(error.value) == (
            "the embedder returned a vector of 3 dimensions for 'short'; "
            "the store's index has dims=4"
        )
        # neither put of the batch went in; the item and its vector are as they were
        item = store.get(("d",), "k")
        assert item is not None and item.value == {"text": "tea"}
        assert store.get(("d",), "k2") is None
        assert keyed(store.search(("d",), query="tea")) == [("k", 1.0)]
        with pytest.raises(ValueError, match="a vector of 3 dimensions for 'short'"):
            store.search(("d",), query="short")
    finally:
        del VECTORS["short"]


@pytest.mark.parametrize("other_dims", [3, 2])
def test_vectors_stored_with_other_dims_are_a_clear_error(server_url: str, other_dims: int) -> None:
    """Also dims that divide the stored ones (2 of 4: each vector would read as two)."""
    prefix = new_prefix()
    four = {"dims": 4, "embed": KnownEmbeddings(), "fields": ["text"]}
    with RedisStore.from_conn_string(server_url, prefix=prefix, index=four) as store:
        store.put(("o",), "k", {"text": "tea"})

    def other(texts: list[str]) -> list[list[float]]:
        return [[1.0] + [0.0] * (other_dims - 1) for _ in texts]

    index = {"dims": other_dims, "embed": other, "fields": ["text"]}
    with RedisStore.from_conn_string(server_url, prefix=prefix, index=index) as store:
        with pytest.raises(ValueError) as error:
            store.search(("o",), query="tea")
        assert str(error.value) == (
            f"stored vectors of dims=4 (20 bytes) do not fit the store's index, "
            f"dims={other_dims} (written by a store with another dims? re-put the items)"
        )
        assert keyed(store.search(("o",))) == [("k", None)]  # a search without query reads
        store.put(("o",), "k", {"text": "tea"})  # re-put: of the new dims
        assert [(i.key, i.score) for i in store.search(("o",), query="tea")] == [("k", 1.0)]


@pytest.mark.parametrize(
    ("index", "message"),
    [
        ({"dims": 0, "embed": lambda t: t}, "index 'dims' must be a positive int, not 0"),
        ({"dims": "4", "embed": lambda t: t}, "index 'dims' must be a positive int, not '4'"),
        ({"dims": 4}, "index has no 'embed' (an Embeddings object or an embedding function)"),
        ({"dims": 4, "embed": lambda t: t, "field": ["x"]}, "unknown index settings: ['field']"),
        ({"dims": 4, "embed": lambda t: t, "fields": "text"}, "index 'fields' must be a list"),
    ],
)
def test_a_bad_index_config_is_refused(index: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError) as error:
        RedisStore("redis://127.0.0.1:1/0", index=index)  # type: ignore[arg-type]
    assert str(error.value).startswith(message)


def test_a_decoding_client_is_refused_with_an_index() -> None:
    client = redis.Redis.from_url("redis://127.0.0.1:1/0", decode_responses=True)
    index = {"dims": 4, "embed": KnownEmbeddings()}
    with pytest.raises(ValueError, match=r"decodes replies into text \(decode_responses=True\)"):
        RedisStore(client=client, index=index)  # type: ignore[arg-type]
    RedisStore(client=client).close()  # without an index it reads text only


async def test_the_async_store_embeds_with_the_async_embedder(server_url: str) -> None:
    calls: list[list[str]] = []

    async def aembed(texts: list[str]) -> list[list[float]]:
        calls.append(list(texts))
        return [VECTORS[t] for t in texts]

    index = {"dims": 4, "embed": aembed, "fields": ["text"]}
    async with AsyncRedisStore.from_conn_string(
        server_url,
        prefix=new_prefix(),
        index=index,  # type: ignore[arg-type]
    ) as store:
        await store.aput(("a",), "k1", {"text": "coffee"})
        await store.aput(("a",), "k2", {"text": "tea and coffee"})
        found = await store.asearch(("a",), query="tea")
        assert keyed(found) == [("k2", 1 / math.sqrt(2)), ("k1", 0.0)]
        assert calls == [["coffee"], ["tea and coffee"], ["tea"]]


def test_an_async_embedder_on_the_sync_store_is_a_clear_error(server_url: str) -> None:
    async def aembed(texts: list[str]) -> list[list[float]]:
        return [VECTORS[t] for t in texts]

    index = {"dims": 4, "embed": aembed, "fields": ["text"]}
    with RedisStore.from_conn_string(server_url, prefix=new_prefix(), index=index) as store:  # type: ignore[arg-type]
        with pytest.raises(ValueError, match="async"):
            store.put(("a",), "k1", {"text": "coffee"})
        assert store.search(("a",)) == []


@pytest.mark.parametrize("numpy", [True, False])
def test_a_search_over_several_pages_ranks_as_inmemorystore(
    server_url: str, numpy: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """1,300 items in two namespaces (pages of 512 at dims 4): the whole ranking is
    InMemoryStore's, scores equal (the vectors are exact in float32); with numpy, and with
    the pure-Python cosine both stores use without it."""
    if not numpy:
        monkeypatch.setattr(memory, "_check_numpy", lambda: False)
        monkeypatch.setattr(vectors, "_has_numpy", lambda: False)

    def embed(texts: list[str]) -> list[list[float]]:
        return [[float(int(t) % 7), float(int(t) % 11), float(int(t) % 13), 1.0] for t in texts]

    index = {"dims": 4, "embed": embed, "fields": ["text"]}
    model = InMemoryStore(index=index)  # type: ignore[arg-type]
    ops = [PutOp(("p", str(n % 2)), f"k{n}", {"text": str(n)}) for n in range(1300)]
    model.batch(ops)
    with RedisStore.from_conn_string(server_url, prefix=new_prefix(), index=index) as store:  # type: ignore[arg-type]
        store.batch(ops)
        want = model.search(("p",), query="5", limit=2000)
        rounds: list[list[Any]] = []
        run = store._run
        monkeypatch.setattr(store, "_run", lambda calls: rounds.append(calls) or run(calls))
        got = store.search(("p",), query="5", limit=2000)
        # the namespace index, then pages of at most 512 items, one per namespace a round,
        # read without renewing them, then the items returned renewed (refresh_ttl)
        # (each page: its namespace, then refresh, page size and vectors of its arguments)
        pages = [
            [(c[2][0][-6:], c[3][1], c[3][4], c[3][5]) for c in calls] for calls in rounds[1:-1]
        ]
        assert [c[:2] for c in rounds[0]] == [("command", "ZRANGEBYLEX")]
        assert pages == [[("p.0}:h", "0", 512, "1"), ("p.1}:h", "0", 512, "1")]] * 2
        assert [(c[1], c[3][1]) for c in rounds[-1]] == [("store_get", "1")] * 1300
        order = {(tuple(i.namespace), i.key): n for n, i in enumerate(ops[::-1])}
        # ties: InMemoryStore keeps insertion order, this store puts the newest first
        want.sort(key=lambda i: (-(i.score or 0.0), order[(tuple(i.namespace), i.key)]))
        assert [(tuple(i.namespace), i.key, i.score) for i in got] == [
            (tuple(i.namespace), i.key, i.score) for i in want
        ]
        assert len(got) == 1300 and [i.key for i in got[:2]] == ["k1006", "k5"]
        page = store.search(("p",), query="5", limit=3, offset=700)
        assert [i.key for i in page] == [i.key for i in want[700:703]]
        # a round of one page: the namespaces one after the other, the best kept between
        monkeypatch.setattr(semantic, "VECTOR_ROUND_BYTES", 512 * 4 * 4)
        rounds.clear()
        page = store.search(("p",), query="5", limit=3, offset=2)
        assert [(i.key, i.score) for i in page] == [(i.key, i.score) for i in want[2:5]]
        pages = [[(c[2][0][-6:], c[3][4:]) for c in calls] for calls in rounds[1:-1]]
        one = [512, "1", semantic.PAGE_BYTES]
        assert pages == [[("p.0}:h", one)]] * 2 + [[("p.1}:h", one)]] * 2
        assert [(c[1], c[3][2].decode()) for c in rounds[-1]] == [
            ("store_get", i.key) for i in page
        ]


def test_a_query_search_renews_only_the_items_it_returns(server_url: str) -> None:
    """refresh_on_read: a query reads every item under the prefix, and renews only those it
    returns (before, one broad search kept every item alive)."""
    index = {"dims": 4, "embed": KnownEmbeddings(), "fields": ["text"]}
    ttl = {"default_ttl": 1, "refresh_on_read": True}
    minute = 60_000
    now = [1_900_000_000_000]
    with RedisStore.from_conn_string(
        server_url, prefix=new_prefix(), ttl=ttl, index=index
    ) as store:
        store.config.clock = lambda: now[0]
        store.put(("o",), "a", {"text": "tea"})
        store.put(("o",), "b", {"text": "coffee"})
        now[0] += minute * 5 // 6  # 50 s
        found = store.search(("o",), query="tea", limit=1)
        assert [(i.key, i.score) for i in found] == [("a", 1.0)]
        now[0] += minute * 5 // 6  # 100 s: b's minute is over, a was renewed at 50 s
        assert store.get(("o",), "b", refresh_ttl=False) is None
        got = store.get(("o",), "a", refresh_ttl=False)
        assert got is not None and got.value == {"text": "tea"}


def test_a_zero_query_scores_every_item_0(server_url: str) -> None:
    """As InMemoryStore without numpy (with numpy it would divide by a zero norm)."""
    index = {"dims": 4, "embed": KnownEmbeddings(), "fields": ["text"]}
    with RedisStore.from_conn_string(server_url, prefix=new_prefix(), index=index) as store:
        store.put(("o",), "a", {"text": "tea"})
        store.put(("o",), "b", {"text": "coffee"})
        found = store.search(("o",), query="zero")
        assert sorted((i.key, i.score) for i in found) == [("a", 0.0), ("b", 0.0)]


def test_a_query_search_pages_by_bytes_when_items_hold_many_vectors(
    server_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An item has a vector per text (``tags[*]``): a page of a query search ends once it
    holds PAGE_BYTES of values and vectors, whatever its count, and the rounds shrink to the
    bytes they bring; the ranking is still InMemoryStore's."""

    def embed(texts: list[str]) -> list[list[float]]:
        return [[float((int(t) * (d + 3)) % 17) for d in range(16)] for t in texts]

    index = {"dims": 16, "embed": embed, "fields": ["tags[*]"]}
    model = InMemoryStore(index=index)  # type: ignore[arg-type]
    ops = [
        PutOp(("m", str(n % 3)), f"k{n}", {"tags": [str(n * 20 + t) for t in range(20)]})
        for n in range(60)
    ]
    model.batch(ops)
    item_bytes = 4 + 20 * 16 * 4 + len(json.dumps(ops[-1].value, separators=(",", ":")))
    monkeypatch.setattr(semantic, "PAGE_BYTES", 3 * item_bytes)
    monkeypatch.setattr(semantic, "VECTOR_ROUND_BYTES", 6 * item_bytes)
    with RedisStore.from_conn_string(server_url, prefix=new_prefix(), index=index) as store:  # type: ignore[arg-type]
        store.batch(ops)
        held: list[list[int]] = []
        read: list[int] = []
        run = store._run

        def recording(calls: list[Any]) -> list[Any]:
            replies = run(calls)
            if calls and calls[0][1] == "store_page":
                read.extend((len(r) - 3) // 5 for r in replies)
                held.append(
                    [
                        sum(len(r[3 + j + 1]) + len(r[3 + j + 4]) for j in range(0, len(r) - 3, 5))
                        for r in replies
                    ]
                )
            return replies

        monkeypatch.setattr(store, "_run", recording)
        got = store.search(("m",), query="7", limit=100, refresh_ttl=False)
        want = model.search(("m",), query="7", limit=100)
        order = {(tuple(i.namespace), i.key): n for n, i in enumerate(ops[::-1])}
        want.sort(key=lambda i: (-(i.score or 0.0), order[(tuple(i.namespace), i.key)]))
        assert [(i.key, i.score) for i in got] == [(i.key, i.score) for i in want]
        # each page at most PAGE_BYTES and one item more; a round at most 6 items' worth
        # after the first (2 namespaces of 3 items), never 3 namespaces of a full page
        assert all(b <= 3 * item_bytes + item_bytes for pages in held for b in pages)
        assert max(len(pages) for pages in held) <= 2
        assert sum(read) == 60  # (every item read once)
