"""Namespace validation, as LangGraph's store tests check it (see test_langgraph_store_cases.py
for the upstream files): the errors BaseStore's methods raise, and the same labels refused in a
``batch``, which takes ops that did not go through those methods (as PostgresStore does)."""

from __future__ import annotations

from typing import Any

import pytest
from langgraph.store.base import (
    GetOp,
    InvalidNamespaceError,
    ListNamespacesOp,
    MatchCondition,
    PutOp,
    SearchOp,
)
from langgraph.store.memory import InMemoryStore

from .cases import Store, call, keys, one, open_store, shape
from .test_store_vectors import KnownEmbeddings


@pytest.fixture(params=["sync", "async"])
async def store(request: pytest.FixtureRequest, server_url: str) -> Any:
    async with open_store(server_url, request.param) as store:
        yield store


DOC = {"foo": "bar"}


# libs/checkpoint tests test_store.py::test_cannot_put_empty_namespace (the refusals): the
# messages are InMemoryStore's, as both come from BaseStore.put
@pytest.mark.parametrize(
    "namespace",
    [
        (),
        ("the", "thing.about"),
        ("some", "fun", ""),
        ("langgraph", "foo"),
        ("a\x00b",),
        ("foo", 1),
    ],
)
async def test_a_put_refuses_a_bad_namespace(store: Store, namespace: tuple[Any, ...]) -> None:
    with pytest.raises(InvalidNamespaceError) as ours:
        await call(store, "put", namespace, "foo", DOC)
    with pytest.raises(InvalidNamespaceError) as theirs:
        InMemoryStore().put(namespace, "foo", DOC)
    assert str(ours.value) == str(theirs.value)
    assert await call(store, "list_namespaces") == []


# libs/checkpoint tests test_store.py::test_cannot_put_empty_namespace (what is allowed):
# "langgraph" below the root, and at the root through batch, past the public put
async def test_langgraph_is_reserved_at_the_root_of_a_put_only(store: Store) -> None:
    namespace = ("foo", "langgraph", "foo")
    await call(store, "put", namespace, "bar", DOC)
    assert one(await call(store, "get", namespace, "bar")) == (namespace, "bar", DOC)
    assert shape(await call(store, "search", namespace)) == [(namespace, "bar", DOC)]
    await call(store, "delete", namespace, "bar")
    assert await call(store, "get", namespace, "bar") is None
    model = InMemoryStore()
    ours = await call(store, "batch", [PutOp(("langgraph", "foo"), "bar", DOC)])
    assert ours == model.batch([PutOp(("langgraph", "foo"), "bar", DOC)]) == [None]
    assert one(await call(store, "get", ("langgraph", "foo"), "bar")) == (
        ("langgraph", "foo"),
        "bar",
        DOC,
    )
    assert shape(await call(store, "search", ("langgraph", "foo"))) == shape(
        model.search(("langgraph", "foo"))
    )
    assert await call(store, "list_namespaces") == [("langgraph", "foo")]
    await call(store, "delete", ("langgraph", "foo"), "bar")
    assert await call(store, "get", ("langgraph", "foo"), "bar") is None


BAD = [("foo.bar",), ("foo", ""), ("foo", 1), ("foo", "a\x00")]


# postgres test_namespace_validation.py::test_invalid_namespace_batch and
# test_async_namespace_validation: a label BaseStore refuses is refused in a batch too, and
# the batch does nothing. (Here "foo.bar" would address the namespace ("foo", "bar"): before
# the check a batch's GetOp(("foo.bar",)) read its item and a PutOp overwrote it.)
@pytest.mark.parametrize("namespace", BAD)
@pytest.mark.parametrize("kind", ["get", "put", "delete", "search", "prefix", "suffix"])
async def test_a_batch_refuses_a_bad_namespace(
    store: Store, namespace: tuple[Any, ...], kind: str
) -> None:
    op = {
        "get": GetOp(namespace, "key"),
        "put": PutOp(namespace, "key", {"changed": True}),
        "delete": PutOp(namespace, "key", None),
        "search": SearchOp(namespace),
        "prefix": ListNamespacesOp((MatchCondition("prefix", namespace),)),
        "suffix": ListNamespacesOp((MatchCondition("suffix", namespace),)),
    }[kind]
    await call(store, "put", ("foo", "bar"), "key", {"original": True})
    with pytest.raises(InvalidNamespaceError):
        await call(store, "batch", [PutOp(("valid",), "key", {}), op])
    assert one(await call(store, "get", ("foo", "bar"), "key")) == (
        ("foo", "bar"),
        "key",
        {"original": True},
    )
    assert await call(store, "get", ("valid",), "key") is None
    assert await call(store, "list_namespaces") == [("foo", "bar")]


# postgres test_namespace_validation.py::test_invalid_namespace_public: get, delete, search
# and list_namespaces refuse such labels (BaseStore's checks), with InMemoryStore's messages
@pytest.mark.parametrize("namespace", BAD)
@pytest.mark.parametrize("method", ["get", "delete", "search", "prefix", "suffix"])
async def test_the_methods_refuse_a_bad_namespace(
    store: Store, namespace: tuple[Any, ...], method: str
) -> None:
    await call(store, "put", ("foo", "bar"), "key", {"original": True})
    name, args, kwargs = {
        "get": ("get", (namespace, "key"), {}),
        "delete": ("delete", (namespace, "key"), {}),
        "search": ("search", (namespace,), {}),
        "prefix": ("list_namespaces", (), {"prefix": namespace}),
        "suffix": ("list_namespaces", (), {"suffix": namespace}),
    }[method]
    with pytest.raises(InvalidNamespaceError) as ours:
        await call(store, name, *args, **kwargs)
    with pytest.raises(InvalidNamespaceError) as theirs:
        getattr(InMemoryStore(), name)(*args, **kwargs)
    assert str(ours.value) == str(theirs.value)
    assert one(await call(store, "get", ("foo", "bar"), "key")) == (
        ("foo", "bar"),
        "key",
        {"original": True},
    )


# postgres test_namespace_validation.py::test_hierarchical_search_and_listing_preserved
async def test_hierarchical_search_and_listing_preserved(store: Store) -> None:
    namespaces = [("user_%",), ("user_%", "child"), ("userX%",), ("USER_%",)]
    for namespace in namespaces:
        await call(store, "put", namespace, "key", {})
    assert {tuple(i.namespace) for i in await call(store, "search", ())} == set(namespaces)
    assert {tuple(i.namespace) for i in await call(store, "search", ("user_%",))} == set(
        namespaces[:2]
    )
    assert await call(store, "list_namespaces", prefix=("user_%", "*")) == [("user_%", "child")]


# (InMemoryStore's batch takes the namespace () that put refuses; it was listed here as ("",),
# a namespace no put can make, and its items searched as namespace ("",))
async def test_the_empty_namespace_through_batch_is_listed_as_inmemorystore_lists_it(
    store: Store,
) -> None:
    model = InMemoryStore()
    ops = [PutOp((), "k", {"v": 1}), PutOp(("a",), "k", {"v": 2})]
    assert await call(store, "batch", ops) == model.batch(ops)
    assert await call(store, "list_namespaces") == model.list_namespaces() == [(), ("a",)]
    assert shape(await call(store, "search", ())) == [(("a",), "k", {"v": 2}), ((), "k", {"v": 1})]
    assert one(await call(store, "get", (), "k")) == one(model.get((), "k")) == ((), "k", {"v": 1})
    assert keys(await call(store, "search", ("a",))) == ["k"]


# (the check comes first: an embedder is not called for a batch that is refused)
async def test_a_refused_batch_embeds_nothing(server_url: str) -> None:
    embeddings = KnownEmbeddings()
    index = {"dims": 4, "embed": embeddings, "fields": ["text"]}
    for kind in ("sync", "async"):
        async with open_store(server_url, kind, index=index) as store:
            with pytest.raises(InvalidNamespaceError):
                await call(
                    store,
                    "batch",
                    [PutOp(("ok",), "k", {"text": "tea"}), SearchOp(("a.b",), query="coffee")],
                )
            assert await call(store, "search", ()) == []
    assert embeddings.documents == [] and embeddings.queries == []
