"""A listing stops at its page: the namespace index holds the namespaces in the order of
their tuples (index_member), so ``list_namespaces(prefix, limit, offset)`` reads its page of
it, a step at a time, not every namespace under the prefix; with emptied namespaces still
in the index (swept lazily) it reads on until the page is full. With a max_depth, the walk
jumps past the namespaces under each cut namespace it found."""

from __future__ import annotations

from typing import Any

import pytest
from langgraph.store.base import PutOp
from langgraph.store.memory import InMemoryStore

from langgraph.store.rediskv import RedisStore, listing

USERS = [("users", f"u{i:04d}") for i in range(500)]


def counted(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many namespaces each liveness round of a listing counts (listing.py's
    live_namespaces: the sweep's rounds are not counted)."""
    sizes: list[int] = []
    real = listing.live_namespaces

    def spy(config: Any, namespaces: list[tuple[str, ...]], now: str) -> Any:
        sizes.append(len(namespaces))
        return (yield from real(config, namespaces, now))

    monkeypatch.setattr(listing, "live_namespaces", spy)
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
    # a max_depth cut to the prefix: one namespace asked, then the walk jumps past them all
    assert store.list_namespaces(prefix=("users",), max_depth=1) == [("users",)]
    assert sizes == [1]


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


# 300 users with two namespaces each, and one with a namespace of its own at depth 2
TWO_DEEP = sorted(
    [("users", f"u{i:04d}", kind) for i in range(300) for kind in ("memories", "prefs")]
    + [("users", "u0150")]
)


def test_a_max_depth_listing_reads_a_step_of_cut_namespaces(
    store: RedisStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    store.batch([PutOp(n, "k", {"v": 1}) for n in TWO_DEEP])
    users = [("users", f"u{i:04d}") for i in range(300)]
    sizes = counted(monkeypatch)
    assert store.list_namespaces(prefix=("users",), max_depth=2, limit=10) == users[:10]
    assert sizes == [32]  # 64 namespaces, 32 users: the first of each asked
    sizes.clear()
    got = store.list_namespaces(prefix=("users",), max_depth=2, limit=100, offset=120)
    assert got == users[120:220]
    # steps of 220 namespaces: 110 users, then 110 (u0150 has three namespaces; the step
    # ends inside u0219's)
    assert sizes == [110, 110]
    sizes.clear()
    assert store.list_namespaces(max_depth=1) == [("users",)]
    assert store.list_namespaces(max_depth=3, prefix=("users", "u0150")) == [
        ("users", "u0150"),
        ("users", "u0150", "memories"),
        ("users", "u0150", "prefs"),
    ]
    assert sizes == [1, 3]


def test_a_max_depth_listing_asks_on_under_a_cut_whose_first_namespace_is_empty(
    store: RedisStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A namespace emptied stays in the index until a listing or the sweep meets it: the
    cut counts when any namespace under it is live, read on over the steps' boundary."""
    # ("users", "u0000") too: the first step of 64 namespaces ends with u0031's memories
    namespaces = [("users", "u0000"), *TWO_DEEP]
    store.batch([PutOp(n, "k", {"v": 1}) for n in namespaces])
    # u0000..u0099 emptied but for u0031's prefs, the first namespace of the second step
    gone = [n for n in namespaces if n[1] < "u0100" and n != ("users", "u0031", "prefs")]
    store.batch([PutOp(n, "k", None) for n in gone])
    sizes = counted(monkeypatch)
    got = store.list_namespaces(prefix=("users",), max_depth=2, limit=3)
    assert got == [("users", "u0031"), ("users", "u0100"), ("users", "u0101")]
    # step 1: 32 cuts' first namespaces asked, then the others of those 32; step 2: the
    # 33 cuts from u0031 (its prefs live) to u0063, then the others of the 32 after u0031
    assert sizes[:4] == [32, 32, 33, 31]
    model = InMemoryStore()
    for n in namespaces:
        if n not in gone:
            model.put(n, "k", {"v": 1})
    for limit, offset in [(1, 0), (1, 1), (5, 0), (64, 0), (63, 1), (65, 2), (400, 0)]:
        want = model.list_namespaces(prefix=("users",), max_depth=2, limit=limit, offset=offset)
        got = store.list_namespaces(prefix=("users",), max_depth=2, limit=limit, offset=offset)
        assert got == want, (limit, offset)
