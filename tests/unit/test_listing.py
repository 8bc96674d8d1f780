"""Listings stepped with scripted replies: a thread's pages (sizes around LIST_PAGE, limits,
before), a thread with more namespaces than one call merges (NAMESPACES), an index being
built (BUILDING), and the merge of several threads' streams newest first."""

from __future__ import annotations

from typing import Any

import pytest

from tests.unit.driver import (
    FIRST_PAGE,
    LIST_PAGE,
    LIST_SCAN_BUDGET,
    NAMESPACE_CHUNK,
    SCAN_COUNT,
    THREADS_BY_VALUE,
    Batch,
    Driver,
    SaverCore,
    ScanPage,
    each,
    call,
    encode_part,
    id_score,
    make_core,
    page_reply,
    scan_page,
    stored_record,
)
from tests.unit.helpers import checkpoint_id, config, make_checkpoint

METADATA = {"source": "loop", "step": 1, "user": "u"}


def history(core: SaverCore, thread: str, numbers: list[int], ns: str = "") -> list[list[Any]]:
    """Records of checkpoints ``numbers`` of a thread, newest first (as a page lists them)."""
    records = [
        stored_record(core, config(thread, ns), make_checkpoint(n, {"a": n}), METADATA)
        for n in numbers
    ]
    return sorted(records, key=lambda r: r[1], reverse=True)


def ids(tuples: list[Any]) -> list[str]:
    return [t.config["configurable"]["checkpoint_id"] for t in tuples]


def thread_pages(records: list[list[Any]], calls: int) -> Driver:
    """A driver whose next ``calls`` list_checkpoints calls page through ``records``."""
    core = make_core()
    driver = Driver(core)
    for _ in range(calls):
        driver.expect(call("list_checkpoints", lambda r: page_reply(records, r)))
    return driver


LONG = list(range(1, 2 * LIST_PAGE + 51))  # 250 checkpoints


@pytest.mark.parametrize(
    ("limit", "pages"),
    [
        (LIST_PAGE - 1, [("", LIST_PAGE - 1)]),
        (LIST_PAGE, [("", LIST_PAGE)]),
        (LIST_PAGE + 1, [("", LIST_PAGE), (checkpoint_id(151), 1)]),
        (
            None,
            [("", LIST_PAGE), (checkpoint_id(151), LIST_PAGE), (checkpoint_id(51), LIST_PAGE)],
        ),
    ],
)
def test_a_thread_is_read_a_page_at_a_time_up_to_the_limit(
    limit: int | None, pages: list[tuple[str, int]]
) -> None:
    records = history(make_core(), "t1", LONG)
    driver = thread_pages(records, len(pages))
    out = driver.stream(driver.core.list_checkpoints(config("t1"), limit=limit))
    driver.done()
    wanted = len(LONG) if limit is None else limit
    assert ids(out) == [checkpoint_id(n) for n in range(250, 250 - wanted, -1)]
    asked = [(r.args[5], r.args[6]) for r in driver.requests]  # type: ignore[union-attr]
    assert asked == [(b if not b else b.encode(), size) for b, size in pages]
    first = driver.requests[0]
    assert first.keys == ("unit:th:{t1}",)  # type: ignore[union-attr]
    assert first.args == ("unit", "{t1}", "0", "", "", "", pages[0][1], LIST_SCAN_BUDGET, 0)  # type: ignore[union-attr]


def test_a_page_the_filter_emptied_is_followed_by_the_next() -> None:
    records = history(make_core(), "t1", [1, 2, 3])
    driver = Driver(make_core()).expect(
        call("list_checkpoints", [checkpoint_id(9).encode()]),  # (a stretch with no match)
        call("list_checkpoints", lambda r: page_reply(records, r)),
    )
    out = driver.stream(
        driver.core.list_checkpoints(config("t1"), filter={"user": "u"}, limit=2)
    )
    driver.done()
    assert ids(out) == [checkpoint_id(3), checkpoint_id(2)]
    first, then = driver.requests
    assert first.args[5:] == ("", 2, LIST_SCAN_BUDGET, 1, "m:user", '"u"')  # type: ignore[union-attr]
    assert then.args[5:7] == (checkpoint_id(9).encode(), 2)  # type: ignore[union-attr]


def test_before_is_the_first_cursor() -> None:
    records = history(make_core(), "t1", [1, 2, 3, 4])
    driver = thread_pages(records, 1)
    before = config("t1", "", checkpoint_id(3))
    out = driver.stream(driver.core.list_checkpoints(config("t1"), before=before))
    assert ids(out) == [checkpoint_id(2), checkpoint_id(1)]
    assert driver.requests[0].args[5] == checkpoint_id(3)  # type: ignore[union-attr]


def test_a_thread_with_more_namespaces_than_one_call_merges_is_merged_by_the_client() -> None:
    core = make_core()
    namespaces = [f"ns{i:04d}" for i in range(NAMESPACE_CHUNK + 1)]
    # the last namespace is alone in the second chunk; its checkpoints alternate with
    # those of the first namespace, in the first chunk
    first_chunk = history(core, "t1", [1, 3, 5], namespaces[0])
    second_chunk = history(core, "t1", [2, 4, 6], namespaces[-1])

    def chunk_page(request: Any) -> list[Any]:
        chunk = list(request.args[9:])
        return page_reply(first_chunk if namespaces[0] in chunk else second_chunk, request)

    driver = Driver(core).expect(
        call("list_checkpoints", [b"NAMESPACES", *(n.encode() for n in reversed(namespaces))]),
        # the two chunks' first pages, in one pipeline
        each(["list_checkpoints", "list_checkpoints"], chunk_page),
    )
    out = driver.stream(core.list_checkpoints({"configurable": {"thread_id": "t1"}}, limit=5))
    driver.done()
    assert ids(out) == [checkpoint_id(n) for n in (6, 5, 4, 3, 2)]
    first = driver.requests[0]
    assert first.args[2:4] == ("1", str(NAMESPACE_CHUNK))  # type: ignore[union-attr]
    chunk_calls = driver.requests[1].calls  # type: ignore[union-attr]
    assert [c.args[2] for c in chunk_calls] == ["2", "2"]
    assert [len(c.args[9:]) for c in chunk_calls] == [NAMESPACE_CHUNK, 1]
    assert list(chunk_calls[0].args[9:]) == namespaces[:NAMESPACE_CHUNK]  # in byte order
    assert list(chunk_calls[1].args[9:]) == namespaces[NAMESPACE_CHUNK:]
