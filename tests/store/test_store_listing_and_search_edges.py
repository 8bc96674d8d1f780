"""The edges of the cut listing (listing._list_cut_namespaces: list_namespaces with a max_depth) and
of the heads' search (search.plain_search over many namespaces), found by a hostile review: a
namespace shorter than the depth at the end of a step, max_depth 0 and negative, and a put between
the heads' round and a later page round. Each failed before its fix."""

from __future__ import annotations

from typing import Any

import pytest
from langgraph.store.base import PutOp
from langgraph.store.memory import InMemoryStore

from langgraph.store.rediskv import RedisStore, listing


def both(store: RedisStore, namespaces: list[tuple[str, ...]]) -> InMemoryStore:
    """The same namespaces, one item each, in the store and in an InMemoryStore."""
    memory = InMemoryStore()
    store.batch([PutOp(n, "k", {"v": 1}) for n in namespaces])
    for n in namespaces:
        memory.put(n, "k", {"v": 1})
    return memory


def bounded_rounds(store: RedisStore, most: int) -> None:
    """The store's rounds fail past ``most``: a listing that never ends fails, not hangs."""
    real = store._run
    count = [0]

    def run(calls: list[Any]) -> list[Any]:
        count[0] += 1
        if count[0] > most:
            raise RuntimeError(f"more than {most} rounds: the listing does not end")
        return real(calls)

    store._run = run  # type: ignore[method-assign]


# --- list_namespaces(max_depth=...) --------------------------------------------------------


@pytest.mark.parametrize("limit", [10, 64, 70])
def test_a_short_namespace_that_ends_a_page_keeps_the_cuts_under_it(
    store: RedisStore, limit: int
) -> None:
    """A page of the index (step = max(offset + limit, 64) members) whose last member is a
    namespace shorter than max_depth, ("b",), that was found live: the walk jumps to
    "[b\\x01", past ("b", "c"), whose cut ("b", "c") is another answer."""
    step = max(limit, listing.LISTING_STEP_MIN)
    # step - 1 namespaces of one cut ("a", "x"), then ("b",) last in the page, then ("b", "c")
    namespaces = [("a", "x", f"{i:03d}") for i in range(step - 1)] + [("b",), ("b", "c")]
    memory = both(store, namespaces)
    expected = [("a", "x"), ("b",), ("b", "c")]
    assert memory.list_namespaces(max_depth=2, limit=limit) == expected
    assert store.list_namespaces(max_depth=2, limit=limit) == expected


def test_a_short_namespace_that_ends_a_page_under_a_prefix_condition(store: RedisStore) -> None:
    """The same with a prefix condition and max_depth 3: ("p", "b") ends the first page of
    64; ("p", "b", "c", "d") cut to ("p", "b", "c") is lost."""
    namespaces = [("p", "a", "x", f"{i:03d}") for i in range(63)]
    namespaces += [("p", "b"), ("p", "b", "c", "d")]
    memory = both(store, namespaces)
    expected = [("p", "a", "x"), ("p", "b"), ("p", "b", "c")]
    assert memory.list_namespaces(prefix=("p",), max_depth=3, limit=5) == expected
    assert store.list_namespaces(prefix=("p",), max_depth=3, limit=5) == expected


def test_max_depth_zero_over_a_full_page_ends(store: RedisStore) -> None:
    """max_depth=0 cuts every namespace to (): InMemoryStore (and the code before the
    change) answers [()]. The cut walk finds (), jumps to "[\\x01", which every member
    follows (a label is never empty), reads the same page again, and loops forever."""
    namespaces = [("n", f"{i:03d}") for i in range(150)]  # more than the step of 100
    memory = both(store, namespaces)
    assert memory.list_namespaces(max_depth=0) == [()]
    bounded_rounds(store, 50)
    assert store.list_namespaces(max_depth=0) == [()]


def test_a_negative_max_depth_answers_sorted(store: RedisStore) -> None:
    """max_depth=-1 (n[:-1], as InMemoryStore and the code before the change take it): the
    cut walk lists the cuts in index order, which is not their order: [(), ("a", "b"),
    ("a",)] instead of [(), ("a",), ("a", "b")]."""
    memory = both(store, [("a",), ("a", "b", "c"), ("a", "x")])
    expected = [(), ("a",), ("a", "b")]
    assert memory.list_namespaces(max_depth=-1) == expected
    assert store.list_namespaces(max_depth=-1) == expected


# --- search over more than SEARCH_HEADS_FROM namespaces ------------------------------------


def test_a_put_between_the_heads_and_a_later_page_round_is_no_snapshot(
    server_url: str, store: RedisStore
) -> None:
    """40 users, one item each, oldest u00 first; only u00 and u20 match the filter. The
    heads' round records u00's head (its item "a"); the namespaces open newest head first in
    batches 2, 4, 8, 16 (u20 in the last); u20 is matched, then u00 opens. A put of a
    matching "late" in u00 after the heads' round (before u00 is paged) comes back *after*
    u20, though it is newer: the answer is not newest-updated first, and it is no state the
    store was ever in (before the put: [u00/late, u20/a]; after: [u20/a, u00/a])."""
    users = [("users", f"u{i:02d}") for i in range(40)]
    for i, n in enumerate(users):
        store.put(n, "a", {"m": i in (0, 20)})
    real = store._run
    injected = []

    def run(calls: list[Any]) -> list[Any]:
        replies = real(calls)
        if not injected and calls and calls[0][1] == "ZREVRANGE":
            # another client's put, between the heads' round and the page rounds
            with RedisStore.from_conn_string(server_url, prefix=store.config.prefix) as other:
                other.put(users[0], "late", {"m": True})
            injected.append(True)
        return replies

    store._run = run  # type: ignore[method-assign]
    got = store.search(("users",), filter={"m": True}, limit=2)
    assert injected
    keys = [(i.namespace[1], i.key) for i in got]
    stamps = [i.updated_at for i in got]
    assert stamps == sorted(stamps, reverse=True), keys  # newest-updated first
    assert keys in ([("u00", "late"), ("u20", "a")], [("u20", "a"), ("u00", "a")])
