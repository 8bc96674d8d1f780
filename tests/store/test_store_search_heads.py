"""A search across many namespaces pages only the namespaces whose items can come first.

Over more than ``search.SEARCH_HEADS_FROM`` namespaces, a search reads each namespace's newest
entry (its head) and pages a namespace only once its head could come before the best item
read, opening namespaces in batches that double. These tests count the namespaces each
round pages, and check the answers against the path that pages every namespace at once."""

from __future__ import annotations

from typing import Any

import pytest
from langgraph.store.base import PutOp

from langgraph.store.rediskv import RedisStore, search

USERS = [("users", f"u{i:04d}") for i in range(500)]


def paged(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many namespaces each page round of the plain search reads (search.py's page_calls:
    the query search's pages are not counted)."""
    sizes: list[int] = []
    real = search.page_calls

    def spy(config: Any, cursors: Any, *args: Any, **kwargs: Any) -> Any:
        sizes.append(len(cursors))
        return real(config, cursors, *args, **kwargs)

    monkeypatch.setattr(search, "page_calls", spy)
    return sizes


def keys_of(items: list[Any]) -> list[tuple[tuple[str, ...], str]]:
    return [(tuple(i.namespace), i.key) for i in items]


def test_a_search_of_every_user_pages_the_namespaces_of_its_answer(
    store: RedisStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    # one batch per user, in order: u0499's items are the newest, its "b" newer than its "a"
    for n in USERS:
        store.batch([PutOp(n, "a", {"v": 1}), PutOp(n, "b", {"v": 2})])
    sizes = paged(monkeypatch)
    got = store.search(("users",), limit=5)
    assert keys_of(got) == [
        (("users", "u0499"), "b"),
        (("users", "u0499"), "a"),
        (("users", "u0498"), "b"),
        (("users", "u0498"), "a"),
        (("users", "u0497"), "b"),
    ]
    assert [i.value for i in got] == [{"v": 2}, {"v": 1}, {"v": 2}, {"v": 1}, {"v": 2}]
    assert sizes == [5]  # the 5 newest heads, not 500 namespaces
    sizes.clear()
    got = store.search(("users",), limit=3, offset=4)
    assert keys_of(got) == [
        (("users", "u0497"), "b"),
        (("users", "u0497"), "a"),
        (("users", "u0496"), "b"),
    ]
    assert sizes == [7]


def test_a_filter_that_matches_little_opens_batches_that_double(
    store: RedisStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Only the oldest user matches: every namespace is paged, in 9 rounds, not 500."""
    for i, n in enumerate(USERS):
        store.put(n, "a", {"first": i == 0})
    sizes = paged(monkeypatch)
    got = store.search(("users",), filter={"first": True}, limit=1)
    assert keys_of(got) == [(("users", "u0000"), "a")]
    assert sizes == [1, 2, 4, 8, 16, 32, 64, 128, 245]
    sizes.clear()
    assert store.search(("users",), filter={"first": "no"}, limit=3) == []
    assert sizes == [3, 6, 12, 24, 48, 96, 192, 119]


def test_a_namespace_whose_newest_item_expired_still_gives_its_live_ones(
    store: RedisStore,
) -> None:
    """A head is an upper bound: an expired newest entry opens its namespace early, and
    the page purges it and goes on to the live items below it."""
    now = [1_700_000_000_000]
    store.config.clock = lambda: now[0]
    for n in USERS[:40]:
        store.put(n, "old", {"v": 0})
        now[0] += 1000
    store.put(USERS[0], "brief", {"v": 1}, ttl=1)  # the newest item, 1 minute
    now[0] += 1000
    store.put(USERS[1], "new", {"v": 2})
    assert keys_of(store.search(("users",), limit=3)) == [
        (("users", "u0001"), "new"),
        (("users", "u0000"), "brief"),
        (("users", "u0039"), "old"),
    ]
    now[0] += 120_000
    assert keys_of(store.search(("users",), limit=3)) == [
        (("users", "u0001"), "new"),
        (("users", "u0039"), "old"),
        (("users", "u0038"), "old"),
    ]
    # 41 live items: "new", then the 40 "old" ones, newest first
    assert keys_of(store.search(("users",), limit=5, offset=39)) == [
        (("users", "u0001"), "old"),
        (("users", "u0000"), "old"),
    ]


@pytest.mark.parametrize("limit", [1, 2, 5, 39, 40, 41, 100])
def test_ties_across_namespaces_come_as_from_the_search_that_pages_every_namespace(
    store: RedisStore, monkeypatch: pytest.MonkeyPatch, limit: int
) -> None:
    """Puts in separate batches at one virtual millisecond share their updated_at across
    namespaces: the heads' path orders the ties as the path that pages every namespace."""
    store.config.clock = lambda: 1_700_000_000_000
    for n in USERS[:40]:
        store.batch([PutOp(n, "a", {"v": 1}), PutOp(n, "b", {"v": 2})])
    monkeypatch.setattr(search, "SEARCH_HEADS_FROM", 1_000)
    answers = {}
    for heads_from in (1_000, 0):
        monkeypatch.setattr(search, "SEARCH_HEADS_FROM", heads_from)
        answers[heads_from] = [
            keys_of(store.search(("users",), limit=limit, offset=offset)) for offset in (0, 3)
        ]
    assert answers[0] == answers[1_000]
    first = answers[0][0]
    assert len(first) == min(limit, 80)
    # every "b" (stamped 1 µs after its "a") before every "a"
    assert [k for _, k in first] == (["b"] * 40 + ["a"] * 40)[:limit]


def test_a_tie_goes_to_the_namespace_the_merge_prefers_not_the_one_the_index_lists_first(
    store: RedisStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The index lists ("a", "b") before ("a-b",); a tie in the merge goes to "a-b" ("-"
    sorts before "."): a namespace whose head equals the best item read is paged too."""
    store.config.clock = lambda: 1_700_000_000_000
    for n in [("a", "b"), ("a-b",)]:
        store.put(n, "k", {"n": list(n)})
    answers = {}
    for heads_from in (1_000, 0):
        monkeypatch.setattr(search, "SEARCH_HEADS_FROM", heads_from)
        answers[heads_from] = (
            keys_of(store.search(("a",), limit=1)),
            keys_of(store.search((), limit=1)),
        )
    assert answers[0] == answers[1_000] == ([(("a", "b"), "k")], [(("a-b",), "k")])
