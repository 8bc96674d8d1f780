"""Semantic search, as LangGraph's store tests check it (see test_langgraph_store_cases.py for
the upstream files). Their embedder (a character-count one) is not ours: the vectors here are
test_differential's ``fake_embed`` (8 small integers from a hash of the text, exact in float32),
so the scores are InMemoryStore's bit for bit and every ranking is compared with its ranking,
re-ordered as docs/store.md says this store orders (ties and unscored items newest first).
test_store_vectors.py already has the exact cosines of known vectors, bad configs, the vectors
going with their items and the paging; these are the cases it does not have."""

from __future__ import annotations

import math
from typing import Any

import pytest
from langgraph.store.base import PutOp, SearchOp
from langgraph.store.memory import InMemoryStore

from .cases import Store, call, keys, open_store
from .test_differential import fake_embed, fake_vector
from .test_store_vectors import keyed

INDEX: dict[str, Any] = {"dims": 8, "embed": fake_embed}


class Pair:
    """This store and an InMemoryStore of the same index, put to alike."""

    def __init__(self, store: Store, model: InMemoryStore) -> None:
        self.store, self.model = store, model
        self.order: dict[tuple[tuple[str, ...], str], int] = {}

    async def put(self, namespace: tuple[str, ...], key: str, value: Any, **kw: Any) -> None:
        self.model._vectors[namespace].pop(key, None)  # a put replaces the vectors here
        self.model.put(namespace, key, value, **kw)
        await call(self.store, "put", namespace, key, value, **kw)
        self.order[(namespace, key)] = max(self.order.values(), default=0) + 1

    async def search(self, prefix: tuple[str, ...], **kw: Any) -> list[tuple[str, float | None]]:
        """Our answer, asserted equal to InMemoryStore's in the documented order."""
        got = keyed(await call(self.store, "search", prefix, **kw))
        limit, offset = kw.pop("limit", 10), kw.pop("offset", 0)
        every = self.model.search(prefix, limit=10_000, **kw)
        newest = {id(i): -self.order[(tuple(i.namespace), i.key)] for i in every}
        ranked = sorted((i for i in every if i.score is not None), key=lambda i: newest[id(i)])
        ranked.sort(key=lambda i: -(i.score or 0.0))
        ranked += sorted((i for i in every if i.score is None), key=lambda i: newest[id(i)])
        assert got == keyed(ranked[offset : offset + limit])
        return got


@pytest.fixture(params=["sync", "async"])
async def pair(request: pytest.FixtureRequest, server_url: str) -> Any:
    async with open_store(server_url, request.param, index=INDEX) as store:
        yield Pair(store, InMemoryStore(index=INDEX))  # type: ignore[arg-type]


def cosine(a: list[float], b: list[float]) -> float:
    dot = sum(x * y for x, y in zip(a, b, strict=True))
    return dot / (math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b)))


def near(x: float) -> Any:
    """``x`` to the last bits (the store's cosine may round otherwise than this one: it equals
    InMemoryStore's exactly, which Pair.search asserts)."""
    return pytest.approx(x, rel=1e-12, abs=1e-15)


# libs/checkpoint tests test_store.py::test_vector_store_initialization, postgres
# test_store.py / test_async_store.py::test_vector_store_initialization
async def test_vector_store_initialization(pair: Pair) -> None:
    assert pair.store.index_config is INDEX
    assert pair.store.index_config["dims"] == 8
    assert pair.store.index_config["embed"] is fake_embed
    assert pair.store.embeddings is not None
    assert pair.store.embeddings.embed_query("tea") == fake_vector("tea")


# libs/checkpoint tests test_store.py::test_vector_insert_with_auto_embedding (and async),
# postgres test_store.py / test_async_store.py::test_vector_insert_with_auto_embedding: no
# fields, the whole value embedded ("$")
async def test_vector_insert_with_auto_embedding(pair: Pair) -> None:
    docs = [
        ("doc1", {"text": "short text"}),
        ("doc2", {"text": "longer text document"}),
        ("doc3", {"text": "longest text document here"}),
        ("doc4", {"description": "text in description field"}),
        ("doc5", {"content": "text in content field"}),
        ("doc6", {"body": "text in body field"}),
    ]
    for key, value in docs:
        await pair.put(("test",), key, value)
    got = await pair.search(("test",), query="long text")
    assert sorted(keys_ for keys_, _ in got) == [f"doc{n}" for n in range(1, 7)]
    assert all(score is not None for _, score in got)


# libs/checkpoint tests test_store.py::test_vector_update_with_embedding (and async), postgres
# test_store.py / test_async_store.py::test_vector_update_with_embedding
async def test_vector_update_with_embedding(pair: Pair) -> None:
    await pair.put(("test",), "doc1", {"text": "zany zebra Xerxes"})
    await pair.put(("test",), "doc2", {"text": "something about dogs"})
    await pair.put(("test",), "doc3", {"text": "text about birds"})
    zany = '{"text": "zany zebra Xerxes"}'  # (the whole value is the text embedded)
    best = cosine(fake_vector(zany), fake_vector(zany))
    before = await pair.search(("test",), query=zany)
    assert before[0] == ("doc1", near(best))
    await pair.put(("test",), "doc1", {"text": "new text about dogs"})
    after = dict(await pair.search(("test",), query=zany))
    dogs = '{"text": "new text about dogs"}'
    assert after["doc1"] == near(cosine(fake_vector(zany), fake_vector(dogs)))
    assert after["doc1"] < best
    top = (await pair.search(("test",), query=dogs))[0]
    assert top == ("doc1", near(cosine(fake_vector(dogs), fake_vector(dogs))))
    await pair.put(("test",), "doc4", {"text": "new text about dogs"}, index=False)
    got = await pair.search(("test",), query=dogs, limit=4)
    # not indexed: after the scored items, without a score (upstream: not in the top 3)
    assert "doc4" not in [k for k, _ in got[:3]] and got[3] == ("doc4", None)


# libs/checkpoint tests test_store.py::test_vector_search_with_filters (and async), postgres
# test_store.py::test_vector_search_with_filters (with refresh_ttl both ways),
# test_async_store.py::test_vector_search_with_filters
@pytest.mark.parametrize("refresh_ttl", [True, False])
async def test_vector_search_with_filters(pair: Pair, refresh_ttl: bool) -> None:
    docs = [
        ("doc1", {"text": "red apple", "color": "red", "score": 4.5}),
        ("doc2", {"text": "red car", "color": "red", "score": 3.0}),
        ("doc3", {"text": "green apple", "color": "green", "score": 4.0}),
        ("doc4", {"text": "blue car", "color": "blue", "score": 3.5}),
    ]
    for key, value in docs:
        await pair.put(("test",), key, value)
    cases = [
        ("apple", {"color": "red"}, {"doc1", "doc2"}),
        ("car", {"color": "red"}, {"doc1", "doc2"}),
        ("bbbbluuu", {"score": {"$gt": 3.2}}, {"doc1", "doc3", "doc4"}),
        ("apple", {"score": {"$gte": 4.0}, "color": "green"}, {"doc3"}),
        ("apple", {"color": {"$ne": "red"}, "score": {"$lt": 4}}, {"doc4"}),
    ]
    for query, filter, expected in cases:
        got = await pair.search(("test",), query=query, filter=filter, refresh_ttl=refresh_ttl)
        assert {k for k, _ in got} == expected


# libs/checkpoint tests test_store.py::test_vector_search_pagination (and async), postgres
# test_store.py / test_async_store.py::test_vector_search_pagination
async def test_vector_search_pagination(pair: Pair) -> None:
    for i in range(5):
        await pair.put(("test",), f"doc{i}", {"text": f"test document number {i}"})
    whole = await pair.search(("test",), query="test", limit=10)
    assert len(whole) == 5
    pages = [await pair.search(("test",), query="test", limit=2, offset=o) for o in (0, 2, 4)]
    assert pages[0] + pages[1] + pages[2] == whole


# postgres test_store.py::test_vector_search_edge_cases, test_async_store.py::
# test_vector_search_edge_cases: an empty query is no query (no scores)
async def test_vector_search_edge_cases(pair: Pair) -> None:
    await pair.put(("test",), "doc1", {"text": "test document"})
    await pair.put(("test",), "doc2", {"text": "other document"})
    assert await pair.search(("test",), query="") == [("doc2", None), ("doc1", None)]
    assert await pair.search(("test",), query=None) == [("doc2", None), ("doc1", None)]
    for query in ("test " * 100, "test!@#$%^&*()"):
        got = await pair.search(("test",), query=query)
        assert len(got) == 2 and all(s is not None and -1 <= s <= 1 for _, s in got)


# libs/checkpoint tests test_store.py::test_embed_with_path, postgres test_store.py::
# test_embed_with_path_sync, test_async_store.py::test_embed_with_path: the index's fields
@pytest.mark.parametrize("kind", ["sync", "async"])
async def test_embed_with_path(server_url: str, kind: str) -> None:
    index = {**INDEX, "fields": ["key0", "key1", "key3"]}
    async with open_store(server_url, kind, index=index) as store:
        pair = Pair(store, InMemoryStore(index=index))  # type: ignore[arg-type]
        # doc1 has no key0 (no error: 2 texts), doc2 has 3; key2 is not embedded
        await pair.put(("test",), "doc1", {"key1": "xxx", "key2": "yyy", "key3": "zzz"})
        await pair.put(
            ("test",), "doc2", {"key0": "uuu", "key1": "vvv", "key2": "www", "key3": "xxx"}
        )
        best = cosine(fake_vector("xxx"), fake_vector("xxx"))
        assert await pair.search(("test",), query="xxx") == [
            ("doc2", near(best)),
            ("doc1", near(best)),
        ]
        assert (await pair.search(("test",), query="uuu"))[0] == ("doc2", near(best))
        assert (await pair.search(("test",), query="zzz"))[0] == ("doc1", near(best))
        www = await pair.search(("test",), query="www")  # only in key2, not embedded
        assert all(score is not None and score < best for _, score in www)


# libs/checkpoint tests test_store.py::test_embed_with_path (its second half), postgres
# test_store.py::test_embed_with_path_operation_config: a put's own paths; index=False
@pytest.mark.parametrize("kind", ["sync", "async"])
async def test_embed_with_path_operation_config(server_url: str, kind: str) -> None:
    index = {**INDEX, "fields": ["key17"]}
    async with open_store(server_url, kind, index=index) as store:
        pair = Pair(store, InMemoryStore(index=index))  # type: ignore[arg-type]
        doc3 = {"key0": "aaa", "key1": "bbb", "key2": "ccc", "key3": "ddd"}
        doc4 = {"key0": "eee", "key1": "bbb", "key2": "fff", "key3": "ggg"}
        await pair.put(("test",), "doc3", doc3, index=["key0", "key1"])
        await pair.put(("test",), "doc4", doc4, index=["key1", "key3"])
        best = cosine(fake_vector("aaa"), fake_vector("aaa"))
        assert (await pair.search(("test",), query="aaa"))[0] == ("doc3", near(best))
        assert (await pair.search(("test",), query="ggg"))[0] == ("doc4", near(best))
        # both hold "bbb": the same best score (a tie: the newest first)
        assert await pair.search(("test",), query="bbb") == [
            ("doc4", near(cosine(fake_vector("bbb"), fake_vector("bbb")))),
            ("doc3", near(cosine(fake_vector("bbb"), fake_vector("bbb")))),
        ]
        ccc = await pair.search(("test",), query="ccc")  # key2: embedded by neither
        assert all(score is not None and score < best for _, score in ccc)
        await pair.put(("test",), "doc5", {"key0": "hhh", "key1": "iii"}, index=False)
        assert await pair.search(("test",)) == [("doc5", None), ("doc4", None), ("doc3", None)]
        hhh = await pair.search(("test",), query="hhh")
        assert len(hhh) == 3 and hhh[2] == ("doc5", None)


# postgres test_store.py::test_scores (the cosine distance): an item's score is the cosine of
# the query's vector with the vector of the item's one embedded text (key1 is missing)
@pytest.mark.parametrize("query", ["aaa", "bbb", "ccc", "abcd", "poisson"])
@pytest.mark.parametrize("kind", ["sync", "async"])
async def test_scores(server_url: str, kind: str, query: str) -> None:
    index = {**INDEX, "fields": ["key0"]}
    async with open_store(server_url, kind, index=index) as store:
        pair = Pair(store, InMemoryStore(index=index))  # type: ignore[arg-type]
        await pair.put(("test",), "doc", {"key0": "aaa"}, index=["key0", "key1"])
        [(key, score)] = await pair.search((), query=query)
        assert key == "doc"
        assert score == near(cosine(fake_vector(query), fake_vector("aaa")))


# postgres test_async_store.py::test_search_sorting: one match among 200 others ranks first,
# and a page holds distinct items
@pytest.mark.parametrize("kind", ["sync", "async"])
async def test_search_sorting(server_url: str, kind: str) -> None:
    index = {**INDEX, "fields": ["key1"]}
    async with open_store(server_url, kind, index=index) as store:
        await call(store, "put", ("test", "M"), "M", {"key1": "mmm"})
        ops = [
            PutOp(("test", n), f"{n}{i}", {"key1": "no"}) for n in ("A", "Z") for i in range(100)
        ]
        await call(store, "batch", ops)
        got = await call(store, "search", ("test",), query="mmm", limit=10)
        assert keys(got) == ["M"] + [f"Z{i}" for i in range(99, 90, -1)]
        assert got[0].score > got[1].score
        assert len({i.score for i in got[1:]}) == 1  # (the same text: ties, newest first)


# libs/checkpoint tests test_store.py::test_non_ascii, postgres test_store.py::test_non_ascii
@pytest.mark.parametrize("kind", ["sync", "async"])
async def test_non_ascii(server_url: str, kind: str) -> None:
    index = {**INDEX, "fields": ["text"]}
    async with open_store(server_url, kind, index=index) as store:
        pair = Pair(store, InMemoryStore(index=index))  # type: ignore[arg-type]
        texts = ["这是中文", "これは日本語です", "이건 한국어야", "Это русский", "यह रूसी है"]
        for n, text in enumerate(texts, 1):
            await pair.put(("user_123", "memories"), str(n), {"text": text})
        for n, text in enumerate(texts, 1):
            got = await pair.search(("user_123", "memories"), query=text)
            assert got[0] == (str(n), near(cosine(fake_vector(text), fake_vector(text))))


# (batch semantics with an index: a query in a batch sees the vectors as they were before the
# batch's puts, as InMemoryStore, which embeds the puts after answering the searches)
async def test_a_query_in_a_batch_sees_the_store_before_its_puts(pair: Pair) -> None:
    await pair.put(("b",), "old", {"text": "coffee"})
    ops = [PutOp(("b",), "new", {"text": "tea"}), SearchOp(("b",), query="tea", limit=5)]
    ours = await call(pair.store, "batch", ops)
    theirs = pair.model.batch(ops)
    assert ours[0] is theirs[0] is None
    assert keyed(ours[1]) == keyed(theirs[1])
    assert [k for k, _ in keyed(ours[1])] == ["old"]
    pair.order[(("b",), "new")] = max(pair.order.values()) + 1
    assert next(k for k, _ in await pair.search(("b",), query='{"text": "tea"}')) == "new"
