"""A listing stops at its page: the namespace index holds the namespaces in the order of
their tuples (index_member), so ``list_namespaces(prefix, limit, offset)`` reads its page of
it, a step at a time, not every namespace under the prefix; with emptied namespaces still
in the index (swept lazily) it reads on until the page is full."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from langgraph.store.base import PutOp
from langgraph.store.memory import InMemoryStore

from langgraph.store.rediskv import RedisStore, core

from ..conftest import new_prefix

USERS = [("users", f"u{i:04d}") for i in range(500)]


@pytest.fixture
def store(server_url: str) -> Iterator[RedisStore]:
    with RedisStore.from_conn_string(server_url, prefix=new_prefix()) as s:
        yield s


def counted(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many namespaces each liveness round of the store counts."""
    sizes: list[int] = []
    real = core._alive

    def spy(config: Any, namespaces: list[tuple[str, ...]], now: str) -> Any:
        sizes.append(len(namespaces))
        return (yield from real(config, namespaces, now))

    monkeypatch.setattr(core, "_alive", spy)
    return sizes


def test_a_listing_reads_its_page_not_every_namespace(
    store: RedisStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    store.batch([PutOp(n, "k", {"v": 1}) for n in USERS])
    sizes = counted(monkeypatch)
    assert store.list_namespaces(prefix=("users",), limit=10, offset=5) == USERS[5:15]
    assert sizes == [64]  # one step (LISTING_STEP_MIN), not 500
    sizes.clear()
    assert store.list_namespaces(prefix=("users",), limit=100, offset=100) == USERS[100:200]
    assert sizes == [200]
    sizes.clear()
    # a max_depth reads every namespace under the prefix
    assert store.list_namespaces(prefix=("users",), max_depth=1) == [("users",)]
    assert sizes == [500]


def test_emptied_namespaces_in_the_index_make_it_read_on(
    store: RedisStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    store.batch([PutOp(n, "k", {"v": 1}) for n in USERS[:200]])
    store.batch([PutOp(n, "k", None) for n in USERS[:100]])  # (still in the index)
    sizes = counted(monkeypatch)
    assert store.list_namespaces(prefix=("users",), limit=10) == USERS[100:110]
    assert sizes == [64, 64]  # 64 empty, then 36 empty and 28 live: two steps
    sizes.clear()
    # the empty ones were swept from the index by the listing that met them
    assert store.list_namespaces(prefix=("users",), limit=10) == USERS[100:110]
    assert sizes == [64]


def test_the_index_orders_as_the_tuples(store: RedisStore) -> None:
    """'-' sorts before '.': in the labels-joined-by-'.' encoding ("a-b" < "a.b") the index
    would not be in the tuples' order (("a", "b") < ("a-b",))."""
    namespaces = [("a",), ("a", "b"), ("a-b",), ("a", "b", "c"), ("ab",), ("a", " "), ("é",)]
    model = InMemoryStore()
    for n in namespaces:
        store.put(n, "k", {"v": 1})
        model.put(n, "k", {"v": 1})
    for offset in range(len(namespaces) + 1):
        for limit in (1, 2, 3, 100):
            assert store.list_namespaces(limit=limit, offset=offset) == model.list_namespaces(
                limit=limit, offset=offset
            ), (limit, offset)
    assert store.list_namespaces(prefix=("a",)) == model.list_namespaces(prefix=("a",))
    assert store.list_namespaces(prefix=("a",)) == [("a",), ("a", " "), ("a", "b"), ("a", "b", "c")]
