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
    Driver,
    SaverCore,
    ScanKeys,
    ScanPage,
    call,
    each,
    id_score,
    make_core,
    page_reply,
    scan_keys,
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
    asked = [(r.args[5], r.args[6]) for r in driver.requests]
    assert asked == [(b if not b else b.encode(), size) for b, size in pages]
    first, *later = driver.requests
    # the first page asks the registry of live threads itself when the thread has no key
    # (a standalone server); the pages after it do not
    assert first.keys == ("unit:th:{t1}", "unit:alive")
    assert {r.keys for r in later} <= {("unit:th:{t1}",)}
    assert first.args == ("unit", "{t1}", "0u", "", "", "", pages[0][1], LIST_SCAN_BUDGET, 0)


def test_a_page_the_filter_emptied_is_followed_by_the_next() -> None:
    records = history(make_core(), "t1", [1, 2, 3])
    driver = Driver(make_core()).expect(
        call("list_checkpoints", [checkpoint_id(9).encode()]),  # (a stretch with no match)
        call("list_checkpoints", lambda r: page_reply(records, r)),
    )
    out = driver.stream(driver.core.list_checkpoints(config("t1"), filter={"user": "u"}, limit=2))
    driver.done()
    assert ids(out) == [checkpoint_id(3), checkpoint_id(2)]
    first, then = driver.requests
    assert first.args[5:] == ("", 2, LIST_SCAN_BUDGET, 1, "m:user", '"u"')
    assert then.args[5:7] == (checkpoint_id(9).encode(), 2)


def test_before_is_the_first_cursor() -> None:
    records = history(make_core(), "t1", [1, 2, 3, 4])
    driver = thread_pages(records, 1)
    before = config("t1", "", checkpoint_id(3))
    out = driver.stream(driver.core.list_checkpoints(config("t1"), before=before))
    assert ids(out) == [checkpoint_id(2), checkpoint_id(1)]
    assert driver.requests[0].args[5] == checkpoint_id(3)


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
    assert first.args[2:4] == ("1u", str(NAMESPACE_CHUNK))
    chunk_calls = driver.requests[1].calls
    assert [c.args[2] for c in chunk_calls] == ["2", "2"]
    assert [len(c.args[9:]) for c in chunk_calls] == [NAMESPACE_CHUNK, 1]
    assert list(chunk_calls[0].args[9:]) == namespaces[:NAMESPACE_CHUNK]  # in byte order
    assert list(chunk_calls[1].args[9:]) == namespaces[NAMESPACE_CHUNK:]


def test_an_index_being_built_is_not_used_every_thread_is_scanned_instead() -> None:
    core = make_core()  # run_id indexed
    t1 = history(core, "t1", [1, 2, 3, 4, 5, 6])
    t2 = history(core, "t2", [7, 8])
    by_thread = {"{t1}": t1, "{t2}": t2, "{t3}": []}

    def thread_page(request: Any) -> list[Any]:
        return page_reply(by_thread[request.args[1]], request)

    driver = Driver(core).expect(
        call("list_indexed", b"BUILDING"),
        scan_page("17", [b"unit:th:{t1}"]),
        call("list_checkpoints", thread_page),  # t1's first page: FIRST_PAGE of them
        call("list_checkpoints", thread_page),  # and the rest
        scan_page(None, [b"unit:th:{t2}", b"unit:th:{t3}"]),
        each(["list_checkpoints", "list_checkpoints"], thread_page),
    )
    out = driver.stream(core.list_checkpoints(None, filter={"run_id": "r1"}))
    driver.done()
    assert ids(out) == [checkpoint_id(n) for n in (6, 5, 4, 3, 2, 1, 8, 7)]
    assert [t.config["configurable"]["thread_id"] for t in out] == ["t1"] * 6 + ["t2"] * 2
    indexed = driver.requests[0]
    assert indexed.keys == ("unit:mi:run_id:%22r1%22",)
    assert indexed.args == (
        "unit",
        "",
        LIST_PAGE,
        LIST_SCAN_BUDGET,
        "run_id",
        1,
        "m:run_id",
        '"r1"',
    )
    scans = [r for r in driver.requests if isinstance(r, ScanPage)]
    assert scans == [ScanPage("unit:th:*", "", SCAN_COUNT), ScanPage("unit:th:*", "17", SCAN_COUNT)]
    t1_first, t1_rest = driver.requests[2:4]
    assert t1_first.args[2:7] == ("1", str(NAMESPACE_CHUNK), "", "", FIRST_PAGE)
    assert t1_rest.args[5:7] == (checkpoint_id(3).encode(), LIST_PAGE)


def test_a_ready_index_lists_every_thread_from_one_page() -> None:
    core = make_core()
    t1 = history(core, "t1", [1, 4])
    t2 = history(core, "t2", [2, 3])
    merged = sorted([*t1, *t2], key=lambda r: r[1], reverse=True)
    tag = {id(r): b"{t1}" for r in t1} | {id(r): b"{t2}" for r in t2}
    page = [None]
    for record in merged:
        page += [tag[id(record)], record]
    driver = Driver(core).expect(call("list_indexed", page))
    out = driver.stream(core.list_checkpoints(None, filter={"run_id": "r1"}, limit=10))
    driver.done()
    assert [(t.config["configurable"]["thread_id"], ids([t])[0]) for t in out] == [
        ("t1", checkpoint_id(4)),
        ("t2", checkpoint_id(3)),
        ("t2", checkpoint_id(2)),
        ("t1", checkpoint_id(1)),
    ]
    assert driver.requests[0].args[2] == 10


def candidate_store(numbers: dict[str, list[int]]) -> tuple[SaverCore, dict[str, list[Any]]]:
    """A core with no metadata index, and the records of each thread, newest first."""
    core = make_core(indexed=())
    return core, {f"{{{t}}}": history(core, t, ns) for t, ns in numbers.items()}


def candidates_reply(by_tag: dict[str, list[Any]]) -> list[Any]:
    """list_thread_candidates.lua's reply: driver 1, the index read whole (false), then each
    thread's tag and score (its newest checkpoint's id_score), by score, highest first."""
    scored = sorted(
        ((tag, id_score(records[0][1])) for tag, records in by_tag.items()),
        key=lambda ts: ts[1],
        reverse=True,
    )
    reply: list[Any] = [1, None]
    for tag, score in scored:
        reply += [tag.encode(), str(int(score)).encode()]
    return reply


@pytest.mark.parametrize(
    ("limit", "before", "wanted"),
    [
        (5, None, [9, 8, 7, 6, 5]),
        (1, None, [9]),
        (20, None, [9, 8, 7, 6, 5, 4, 3, 2, 1]),
        (3, 8, [7, 6, 5]),
    ],
)
def test_threads_by_value_are_merged_newest_first(
    limit: int, before: int | None, wanted: list[int]
) -> None:
    core, by_tag = candidate_store({"t1": [1, 4, 7], "t2": [2, 5, 8], "t3": [3, 6, 9]})
    driver = Driver(core).expect(
        call("list_thread_candidates", candidates_reply(by_tag)),
        each(["list_checkpoints"] * 3, lambda c: page_reply(by_tag[str(c.args[1])], c)),
    )
    before_config = config("t1", "", checkpoint_id(before)) if before else None
    out = driver.stream(
        core.list_checkpoints(None, filter={"user": "u"}, before=before_config, limit=limit)
    )
    driver.done()
    assert ids(out) == [checkpoint_id(n) for n in wanted]
    assert [t.config["configurable"]["thread_id"] for t in out] == [
        f"t{(n - 1) % 3 + 1}" for n in wanted
    ]
    candidates = driver.requests[0]
    assert candidates.keys == ("unit:tm:user:%22u%22",)
    assert candidates.args == ("unit", b"inf", 10_000, 0, "")
    pages = driver.requests[1].calls
    assert [c.args[1] for c in pages] == ["{t3}", "{t2}", "{t1}"]  # by score
    expected_before = checkpoint_id(before) if before else ""
    assert {(c.args[2], c.args[5], c.args[6]) for c in pages} == {
        ("1", expected_before, min(limit, LIST_PAGE))
    }


def test_a_thread_older_than_every_checkpoint_wanted_is_never_read() -> None:
    # eight recent threads fill a group (CANDIDATE_GROUP); the ninth's newest checkpoint is
    # older than the five wanted: its score says so, and its pages are never asked for
    numbers = {f"t{i}": [100 + i, 200 + i] for i in range(1, 9)} | {"t9": [1]}
    core, by_tag = candidate_store(numbers)
    driver = Driver(core).expect(
        call("list_thread_candidates", candidates_reply(by_tag)),
        each(["list_checkpoints"] * 8, lambda c: page_reply(by_tag[str(c.args[1])], c)),
    )
    out = driver.stream(core.list_checkpoints(None, filter={"user": "u"}, limit=5))
    driver.done()
    assert ids(out) == [checkpoint_id(n) for n in (208, 207, 206, 205, 204)]
    listed = {str(c.args[1]) for c in driver.calls("list_checkpoints")}
    assert "{t9}" not in listed and len(listed) == 8


def test_an_unregistered_store_registers_the_threads_by_value_index_first() -> None:
    core = make_core(indexed=())
    driver = Driver(core).expect(
        call("register_metadata_index", [THREADS_BY_VALUE.encode()]),  # not registered
        scan_keys([b"unit:idx:{t1}:"]),  # a checkpoint index: the store has checkpoints
        call("register_metadata_index", 1),
    )
    driver.run(core.register_metadata_index())
    driver.done()
    asked, entered = driver.calls("register_metadata_index")
    assert asked.args == ("?", THREADS_BY_VALUE)
    # checkpoints stored before: building (the reply's keys go back as they came)
    assert entered.args == ("building", THREADS_BY_VALUE.encode())
    assert driver.requests[1] == ScanKeys("unit:idx:*", SCAN_COUNT)
    assert core.registered == [True]


def test_threads_by_value_being_built_are_not_used_every_thread_is_scanned_instead() -> None:
    core, by_tag = candidate_store({"t1": [1, 3], "t2": [2]})
    driver = Driver(core).expect(
        call("list_thread_candidates", b"BUILDING"),
        scan_page(None, [b"unit:th:{t1}", b"unit:th:{t2}", b"unit:th:{t1}"]),
    )
    driver.expect(each(None, lambda c: page_reply(by_tag[str(c.args[1])], c)))
    out = driver.stream(core.list_checkpoints(None, filter={"user": "u"}))
    driver.done()
    # no limit: thread by thread, in SCAN's order, each thread once within a SCAN step
    assert ids(out) == [checkpoint_id(n) for n in (3, 1, 2)]
    pages = driver.requests[2].calls
    assert [(c.args[1], c.args[6]) for c in pages] == [("{t1}", FIRST_PAGE), ("{t2}", FIRST_PAGE)]


def by_id(stores: dict[str, list[Any]], gone: frozenset[str] = frozenset()) -> Any:
    """list_checkpoints.lua's reply to a call for one id (ARGV[5]): its record, or no record
    when it is gone meanwhile."""

    def reply(request: Any) -> list[Any]:
        wanted = str(request.args[4]).encode()
        found = [r for r in stores[str(request.args[1])] if r[1] == wanted]
        return [None] if request.args[4] in gone else [None, *found]

    return reply


def heads(stores: dict[str, list[Any]]) -> Any:
    return each(None, lambda c: page_reply(stores[str(c.args[1])], c))


def test_every_thread_with_a_limit_chooses_the_ids_first_then_reads_those_records() -> None:
    core = make_core()
    stores = {
        "{t1}": history(core, "t1", list(range(100, 115))),
        "{t2}": history(core, "t2", [1, 2]),
    }
    driver = Driver(core).expect(
        scan_page(None, [b"unit:th:{t1}", b"unit:th:{t2}"]),
        heads(stores),  # each thread's newest FIRST_IDS ids
        call("list_checkpoints", lambda r: page_reply(stores["{t1}"], r)),  # t1's next ids
        each(None, by_id(stores)),  # the 12 records chosen
    )
    out = driver.stream(core.list_checkpoints(None, limit=12))
    driver.done()
    assert ids(out) == [checkpoint_id(n) for n in range(114, 102, -1)]
    first_ids = driver.requests[1].calls
    assert [(c.args[1], c.args[5], c.args[6]) for c in first_ids] == [
        ("{t1}", "", -10),
        ("{t2}", "", -10),
    ]
    more = driver.requests[2]
    assert (more.args[1], more.args[5], more.args[6]) == ("{t1}", checkpoint_id(105).encode(), -12)
    records = driver.requests[3].calls
    assert [(c.args[4], c.args[6]) for c in records] == [
        (checkpoint_id(n), 1) for n in range(114, 102, -1)
    ]


def test_a_checkpoint_gone_between_choice_and_read_is_made_up_for_by_the_next() -> None:
    core = make_core()
    stores = {
        "{t1}": history(core, "t1", [1, 4, 7]),
        "{t2}": history(core, "t2", [2, 5, 8]),
        "{t3}": history(core, "t3", [3, 6, 9]),
    }
    threads = [b"unit:th:{t1}", b"unit:th:{t2}", b"unit:th:{t3}"]
    driver = Driver(core).expect(
        scan_page(None, threads),
        heads(stores),
        each(None, by_id(stores, gone=frozenset({checkpoint_id(8)}))),
        scan_page(None, threads),  # chosen again, after the last one chosen (7)
        heads(stores),
        # below "7\0" t1 gives 7 again (of equal ids, one of a later thread would come
        # after the cut), which the cut leaves out: t1 is asked on
        call("list_checkpoints", lambda r: page_reply(stores["{t1}"], r)),
        call("list_checkpoints", by_id(stores)),
    )
    out = driver.stream(core.list_checkpoints(None, limit=3))
    driver.done()
    assert ids(out) == [checkpoint_id(n) for n in (9, 7, 6)]
    again = driver.requests[4].calls
    assert {c.args[5] for c in again} == {checkpoint_id(7).encode() + b"\0"}
    assert {c.args[6] for c in again} == {-1}
    t1_on = driver.requests[5]
    assert (t1_on.args[1], t1_on.args[5], t1_on.args[6]) == ("{t1}", checkpoint_id(7).encode(), -1)
