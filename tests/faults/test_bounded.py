"""Whole-thread operations in bounded steps (issue 11, defects 5, 8, 11, 12, 13).

No script call may hold the server longer than 50 ms, measured with SLOWLOG on a private
server; a delete is invisible from its first step, a copy until it is published, and a job
whose client stopped midway is finished by the next writer or by check_invariants.
"""

from __future__ import annotations

import tracemalloc
from typing import Any

import pytest
import redis

from langgraph.checkpoint.rediskv import RedisSaver
from langgraph.checkpoint.rediskv.core import (
    Batch,
    Op,
    ScanPage,
    ScriptCall,
    codec,
    discovery,
    listing,
    paging,
)
from langgraph.checkpoint.rediskv.core.limits import Limits
from langgraph.checkpoint.rediskv.keys import KeySchema

from ..conftest import (
    data_keys,
    keys_of,
    new_prefix,
    saver_with_limits,
    set_limits,
    set_record_field,
)
from ..integration.test_contract import cfg, chain, make_checkpoint, thread_by_thread


def build_chain(
    saver: RedisSaver, thread: str, count: int, *, ns: str = "", writes_every: int = 10
) -> list[str]:
    """A chain of `count` checkpoints sent in pipelines (not one round trip each): channel
    "n" changes at every step, "c" never does (one blob shared by all), runs of 100."""
    core = saver._core
    calls: list[ScriptCall] = []
    ids: list[str] = []
    parent: str | None = None
    for i in range(count):
        versions = {"n": f"{i + 1:08d}", "c": "00000001"}
        checkpoint = make_checkpoint({"n": i, "c": "constant"}, versions)
        new_versions = {"n": versions["n"]} if i else versions
        config = cfg(thread, ns, parent)
        metadata = {"source": "loop", "step": i, "run_id": f"run-{i // 100}"}
        op = core.put(config, checkpoint, metadata, new_versions)
        request = next(op)
        # requests before the put itself (registering the metadata index ...) go one by one
        while not (isinstance(request, ScriptCall) and request.name == "put_checkpoint"):
            request = op.send(saver._send(request))
        calls.append(request)  # type: ignore[arg-type]
        if writes_every and i % writes_every == 0:
            wconfig = cfg(thread, ns, checkpoint["id"])
            calls.append(next(core.put_writes(wconfig, [("n", i)], f"task-{i}")))
        parent = checkpoint["id"]
        ids.append(parent)
    for start in range(0, len(calls), 1000):
        replies = saver._send(Batch(calls[start : start + 1000]))
        assert all(not isinstance(r, bytes) for r in replies), replies[:3]
    return ids


def drive(saver: RedisSaver, op: Op[Any], steps: int) -> None:
    """Send the first `steps` requests of an operation, then stop, as a client that dies."""
    reply: Any = None
    for _ in range(steps):
        reply = saver._send(op.send(reply))
    op.close()


@pytest.mark.slow
def test_whole_thread_operations_on_a_giant_thread_go_in_steps(
    saver: RedisSaver, monkeypatch: pytest.MonkeyPatch
) -> None:
    """20,000 checkpoints in one namespace and 500 namespaces: every whole-thread operation
    is many script calls, each within a budget of work (it was one call of 0.5-1.5 s). How
    long a call holds the server is measured by benchmarks/server_time.py, not here: a test
    on a shared machine must not assert timings."""
    ids = build_chain(saver, "giant", 20_000)
    for n in range(500):
        build_chain(saver, "wide", 3, ns=f"sub{n}", writes_every=2)
    calls: dict[str, int] = {}
    running = {"operation": ""}
    send = saver._send

    def counting(request: Any) -> Any:
        batch = getattr(request, "calls", None)
        name = running["operation"]
        calls[name] = calls.get(name, 0) + (len(batch) if batch is not None else 1)
        return send(request)

    monkeypatch.setattr(saver, "_send", counting)
    operations = {
        "set_thread_ttl": lambda: saver.set_thread_ttl("giant", 60),
        "pin_thread": lambda: saver.pin_thread("giant"),
        "unpin_thread": lambda: saver.unpin_thread("giant"),
        "check_invariants": saver.check_invariants,
        "copy_thread": lambda: saver.copy_thread("giant", "giant-copy"),
        "delete_for_runs": lambda: saver.delete_for_runs(["run-3", "run-150"]),
        "prune": lambda: saver.prune(["giant-copy", "wide"]),
        "delete_thread": lambda: saver.delete_thread("giant"),
    }
    for name, action in operations.items():
        running["operation"] = name
        action()
    # each goes in steps: at least one call per few thousand checkpoints
    assert {name: n >= 5 for name, n in calls.items()} == dict.fromkeys(operations, True), calls
    assert saver.check_invariants() == []
    assert saver.get_tuple(cfg("giant")) is None
    tup = saver.get_tuple(cfg("giant-copy"))
    assert tup is not None and tup.checkpoint["id"] == ids[-1]
    assert len(list(saver.list(cfg("giant-copy")))) == 1


def test_a_deleted_thread_is_gone_after_the_first_step_and_a_writer_finishes_the_job(
    saver: RedisSaver, client: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    set_limits(monkeypatch, saver, reap_step=50)  # many steps for a small thread
    ids = build_chain(saver, "t", 300)
    build_chain(saver, "other", 3)
    # the client dies after one step (its first request takes the thread out of the
    # registry of live threads, core/deadlines.py)
    drive(saver, saver._core.delete_thread("t"), 2)
    keys = KeySchema(saver.prefix)
    assert client.exists(keys.gc(keys.tag("t")))  # garbage pending
    assert saver.get_tuple(cfg("t")) is None
    assert saver.get_tuple(cfg("t", checkpoint_id=ids[5])) is None
    assert list(saver.list(cfg("t"))) == []
    assert {t.config["configurable"]["thread_id"] for t in saver.list(None)} == {"other"}
    by_index = saver.list(None, filter={"run_id": "run-0"})  # the global metadata index
    assert {t.config["configurable"]["thread_id"] for t in by_index} == {"other"}
    # the next writer reaps the rest first
    fresh = make_checkpoint({"n": "new"}, {"n": "1"})
    saver.put(cfg("t"), fresh, {}, {"n": "1"})
    assert [t.checkpoint["id"] for t in saver.list(cfg("t"))] == [fresh["id"]]
    assert saver.check_invariants() == []


def test_check_invariants_finishes_an_interrupted_delete(
    saver: RedisSaver, client: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    set_limits(monkeypatch, saver, reap_step=50)
    build_chain(saver, "t", 200)
    drive(saver, saver._core.delete_thread("t"), 3)  # (the registry's forget, two steps)
    assert saver.check_invariants() == []
    assert keys_of(client, KeySchema(saver.prefix).thread_keys_pattern("t")) == []


def test_a_copy_is_invisible_until_published_and_discarded_when_abandoned(
    saver: RedisSaver, client: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    set_limits(monkeypatch, saver, export_checkpoints=20)
    ids = build_chain(saver, "src", 100)
    # begin, then export/import chunk pairs: stop after a few chunks
    drive(saver, saver._core.copy_thread("src", "dst"), 7)
    assert saver.get_tuple(cfg("dst")) is None
    assert saver.get_tuple(cfg("dst", checkpoint_id=ids[0])) is None
    assert list(saver.list(cfg("dst"))) == []
    assert "dst" not in {t.config["configurable"]["thread_id"] for t in saver.list(None)}
    # a later copy discards the abandoned one and publishes whole
    saver.copy_thread("src", "dst")
    assert [t.checkpoint["id"] for t in saver.list(cfg("dst"))] == ids[::-1]
    assert saver.check_invariants() == []
    # abandoned again, then deleted: nothing of it stays
    saver.delete_thread("dst")
    drive(saver, saver._core.copy_thread("src", "dst"), 5)
    saver.delete_thread("dst")
    assert keys_of(client, KeySchema(saver.prefix).thread_keys_pattern("dst")) == []
    assert saver.check_invariants() == []


def test_set_thread_ttl_never_shortens_shared_metadata_indexes(
    saver: RedisSaver, client: redis.Redis
) -> None:
    """Defect 5: setting one thread's ttl expired the metadata indexes all threads share."""
    for t in ("a", "b"):
        build_chain(saver, t, 3, writes_every=0)
    saver.set_thread_ttl("a", 1)
    mi = [k for k in keys_of(client, f"{saver.prefix}:mi:*")]
    assert mi and {client.ttl(k) for k in mi} == {-1}
    saver.pin_thread("a")
    saver.unpin_thread("a")
    assert {client.ttl(k) for k in mi} == {-1}
    found = {
        t.config["configurable"]["thread_id"] for t in saver.list(None, filter={"source": "loop"})
    }
    assert found == {"a", "b"}


def test_a_metadata_index_of_one_thread_alone_follows_its_ttl(
    saver: RedisSaver, client: redis.Redis
) -> None:
    build_chain(saver, "a", 3, writes_every=0)
    saver.set_thread_ttl("a", 1)
    assert {0 < client.ttl(k) <= 60 for k in keys_of(client, f"{saver.prefix}:mi:*")} == {True}


def test_delete_removes_blobs_left_by_a_copy_onto_the_same_ids(
    saver: RedisSaver, client: redis.Redis
) -> None:
    """Defect 11: the target's blobs of the replaced records stayed after delete_thread."""
    first = make_checkpoint({"n": "target value"}, {"n": "1"})
    saver.put(cfg("dst"), first, {}, {"n": "1"})
    same_id = {**make_checkpoint({"n": "source value"}, {"n": "2"}), "id": first["id"]}
    saver.put(cfg("src"), same_id, {}, {"n": "2"})
    saver.copy_thread("src", "dst")
    tup = saver.get_tuple(cfg("dst"))
    assert tup is not None and tup.checkpoint["channel_values"] == {"n": "source value"}
    saver.delete_thread("dst")
    assert keys_of(client, KeySchema(saver.prefix).thread_keys_pattern("dst")) == []


def test_orphan_writes_are_reported_and_pruned(saver: RedisSaver) -> None:
    """Defect 13: writes stored for a pruned checkpoint stayed, and the checker was silent."""
    ids = build_chain(saver, "t", 3, writes_every=0)
    saver.prune(["t"])
    saver.put_writes(cfg("t", checkpoint_id=ids[0]), [("n", "late")], "late-task")
    problems = saver.check_invariants()
    assert [p.problem for p in problems] == ["writes without checkpoint"]
    saver.prune(["t"])
    assert saver.check_invariants() == []
    tup = saver.get_tuple(cfg("t"))
    assert tup is not None and tup.checkpoint["id"] == ids[-1]


def test_delete_thread_removes_orphan_writes(saver: RedisSaver, client: redis.Redis) -> None:
    ids = build_chain(saver, "t", 3, writes_every=0)
    saver.prune(["t"])
    saver.put_writes(cfg("t", checkpoint_id=ids[0]), [("n", "late")], "late-task")
    saver.delete_thread("t")
    assert keys_of(client, KeySchema(saver.prefix).thread_keys_pattern("t")) == []


@pytest.mark.parametrize("bad", ["abc", b"abc"])
def test_prune_and_delete_for_runs_refuse_a_single_string(saver: RedisSaver, bad: Any) -> None:
    """Defect 12: a str was taken character by character (threads "a", "b", "c" deleted)."""
    build_chain(saver, "a", 2, writes_every=0)
    with pytest.raises(TypeError, match="list"):
        saver.prune(bad)
    with pytest.raises(TypeError, match="list"):
        saver.delete_for_runs(bad)
    with pytest.raises(TypeError, match="list"):
        saver.prune(bad, strategy="delete_all")
    assert saver.get_tuple(cfg("a")) is not None


def test_delete_for_runs_in_many_steps_keeps_the_rest_whole(
    saver: RedisSaver, monkeypatch: pytest.MonkeyPatch
) -> None:
    set_limits(monkeypatch, saver, reap_step=40)
    ids = build_chain(saver, "t", 500)
    saver.delete_for_runs(["run-1", "run-4"])
    left = [t.checkpoint["id"] for t in saver.list(cfg("t"))]
    assert left == [i for n, i in enumerate(ids) if n // 100 not in (1, 4)][::-1]
    assert saver.check_invariants() == []
    tup = saver.get_tuple(cfg("t", checkpoint_id=ids[250]))
    assert tup is not None and tup.checkpoint["channel_values"] == {"n": 250, "c": "constant"}


def test_delete_removes_blobs_of_a_checkpoint_put_again_with_other_versions(
    saver: RedisSaver, client: redis.Redis
) -> None:
    """Re-putting a checkpoint id with other channel versions leaves the old record's blobs
    referenced by nothing: they are recorded as loose, and delete and prune find them."""
    v1, v2 = saver.get_next_version(None, None), saver.get_next_version(None, None)
    first = make_checkpoint({"n": "first"}, {"n": v1})
    saver.put(cfg("t"), first, {}, {"n": v1})
    again = dict(first, channel_values={"n": "again"}, channel_versions={"n": v2})
    saver.put(cfg("t"), again, {}, {"n": v2})  # type: ignore[arg-type]
    tup = saver.get_tuple(cfg("t"))
    assert tup is not None and tup.checkpoint["channel_values"] == {"n": "again"}
    saver.prune(["t"], strategy="keep_latest")
    keys = KeySchema(saver.prefix)
    assert client.exists(keys.blob(keys.tag("t"), "", "n", v1)) == 0
    assert client.exists(keys.blob(keys.tag("t"), "", "n", v2)) == 1
    saver.put(cfg("t"), first, {}, {"n": v1})  # and back: v2 is now the loose one
    saver.delete_thread("t")
    assert data_keys(client, saver.prefix) == []


def test_delete_for_runs_that_empties_a_namespace_takes_its_loose_blobs(
    saver: RedisSaver, client: redis.Redis
) -> None:
    """Found by the model test: the blobs a re-put left loose stayed, unreachable, after
    delete_for_runs removed the namespace's last checkpoint."""
    v1, v2 = saver.get_next_version(None, None), saver.get_next_version(None, None)
    first = make_checkpoint({"n": "first"}, {"n": v1})
    saver.put(cfg("t"), first, {"run_id": "r"}, {"n": v1})
    again = {**make_checkpoint({"n": "again"}, {"n": v2}), "id": first["id"]}
    saver.put(cfg("t"), again, {"run_id": "r"}, {"n": v2})  # type: ignore[arg-type]
    saver.delete_for_runs(["r"])
    assert saver.check_invariants() == []
    assert data_keys(client, saver.prefix) == []


@pytest.mark.parametrize("window", [1, 3])
def test_list_over_more_threads_than_the_window_holds_pages_of_few(
    saver: RedisSaver, monkeypatch: pytest.MonkeyPatch, window: int
) -> None:
    """list(None, filter, limit) merges the candidate threads; before, it read a page (up to
    100 checkpoints) of each of them at once, so a listing of 100,000 threads held millions
    of checkpoints in the client. Past LIST_WINDOW threads it keeps the next id of each and
    pages of a few."""
    made: dict[str, list[str]] = {}
    for step in range(4):  # interleaved in time: the merge goes from thread to thread
        for n in range(12):
            md = {"step": step, "user_id": "u", "tier": f"t{n % 2}"}
            ns = "" if step % 2 else "sub"
            made.setdefault(f"w{n}", []).extend(chain(saver, f"w{n}", [md], ns=ns))
    expected = sorted((i for ids in made.values() for i in ids), reverse=True)
    flt = {"user_id": "u"}
    assert [t.checkpoint["id"] for t in saver.list(None, filter=flt, limit=100)] == expected

    pages: list[int] = []
    decoded: list[int] = []
    list_call, decode = paging.list_call, codec.Codec.decode_record

    def listed(
        core: Any, thread_id: str, ns: Any, only: str, before: Any, page: int, filter_args: Any
    ) -> Any:
        pages.append(page)
        return list_call(core, thread_id, ns, only, before, page, filter_args)

    def decoded_record(self: Any, thread_id: str, record: Any, warm: bool = False) -> Any:
        decoded.append(len(record))
        return decode(self, thread_id, record, warm)

    # (candidate_group: the 12 threads at once)
    set_limits(monkeypatch, saver, list_window=window, candidate_group=12)
    monkeypatch.setattr(paging, "list_call", listed)
    monkeypatch.setattr(codec.Codec, "decode_record", decoded_record)
    assert [t.checkpoint["id"] for t in saver.list(None, filter=flt, limit=100)] == expected
    assert pages.count(-1) == 12  # a head of each thread first, then pages as needed
    assert [t.checkpoint["id"] for t in saver.list(None, filter=flt, limit=7)] == expected[:7]
    before = cfg("w0", checkpoint_id=expected[10])
    third = {ids[2] for ids in made.values()}
    got = [
        t.checkpoint["id"]
        for t in saver.list(None, before=before, filter={**flt, "step": 2}, limit=100)
    ]
    assert got == [i for i in expected[11:] if i in third]
    assert set(decoded) == {7}  # whole records only: a head ({ns, id}) is never handed out


@pytest.mark.parametrize("window", [1, 2])
def test_a_window_over_threads_with_the_same_ids_makes_progress(
    saver: RedisSaver, monkeypatch: pytest.MonkeyPatch, window: int
) -> None:
    """Copies share their checkpoint ids. Reading one head's page put another stream with
    the same id back to its head, at the top of the heap (ties were in no order), and the
    listing read pages for ever (the model found it, at LIST_WINDOW 2); of equal ids, whole
    records now come out first."""
    ids = chain(saver, "t0", [{"source": "loop", "step": i} for i in range(5)])
    for copy in ("t1", "copy2", "copy3"):
        saver.copy_thread("t0", copy)
    set_limits(monkeypatch, saver, list_window=window)
    calls = 0
    send = saver._send

    def counted(request: Any) -> Any:
        nonlocal calls
        calls += not isinstance(request, ScanPage)  # (SCAN steps: as many as the keyspace needs)
        assert calls < 100, "the listing makes no progress"
        return send(request)

    monkeypatch.setattr(saver, "_send", counted)
    flt = {"source": "loop"}
    got = [t.checkpoint["id"] for t in saver.list(None, filter=flt, limit=100)]
    assert got == [i for i in reversed(ids) for _ in range(4)]
    got = [t.checkpoint["id"] for t in saver.list(None, limit=100)]
    assert got == [i for i in reversed(ids) for _ in range(4)]


def test_a_window_stream_that_ends_on_an_empty_page_holds_no_place(
    saver: RedisSaver, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A thread whose next page comes back empty (its older checkpoints do not match the
    filter) is done; it kept its place among the streams holding a page, at a position of a
    page that was now empty, and the next stream read into the window failed on it."""
    older = {f"o{n}": chain(saver, f"o{n}", [{"k": "x"}]) for n in range(2)}
    ids = chain(saver, "a", [{"k": "y"}] + [{"k": "x"}] * 3)  # the oldest does not match
    set_limits(monkeypatch, saver, list_window=1, list_page=3)
    got = [t.checkpoint["id"] for t in saver.list(None, filter={"k": "x"}, limit=100)]
    assert got == ids[:0:-1] + older["o1"] + older["o0"]


def many_threads(saver: RedisSaver, threads: int, per_thread: int, name: str = "m") -> list[str]:
    """`threads` threads of `per_thread` checkpoints each, the puts sent in pipelines of 1000;
    the ids, newest first."""
    core = saver._core
    calls: list[ScriptCall] = []
    ids: list[str] = []
    for n in range(threads):
        parent: str | None = None
        for i in range(per_thread):
            version = f"{i + 1:08d}"
            checkpoint = make_checkpoint({"n": f"value {i} of {n}"}, {"n": version})
            metadata = {"source": "loop", "step": i, "user_id": f"u{n % 7}"}
            op = core.put(cfg(f"{name}{n}", "", parent), checkpoint, metadata, {"n": version})
            request = next(op)
            while not (isinstance(request, ScriptCall) and request.name == "put_checkpoint"):
                request = op.send(saver._send(request))
            calls.append(request)
            parent = checkpoint["id"]
            ids.append(parent)
    for start in range(0, len(calls), 1000):
        replies = saver._send(Batch(calls[start : start + 1000]))
        assert all(not isinstance(r, bytes) for r in replies), replies[:3]
    return sorted(ids, reverse=True)


def peak_of(saver: RedisSaver, **kw: Any) -> tuple[int, int]:
    """How many checkpoints list(None, **kw) yields, and the peak of the client's memory
    (tracemalloc) while it runs, none of them kept: the second run (the first leaves
    caches of redis-py and Python behind, a few hundred KB whatever the threads)."""
    sum(1 for _ in saver.list(None, **kw))
    tracemalloc.start()
    try:
        count = sum(1 for _ in saver.list(None, **kw))
        return count, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def forget_prefix(client: redis.Redis, prefix: str) -> None:
    """Remove a test's keys from the shared server."""
    keys = keys_of(client, f"{prefix}:*")
    for start in range(0, len(keys), 1000):
        client.unlink(*keys[start : start + 1000])


@pytest.mark.slow
def test_list_none_holds_the_same_memory_over_ten_times_the_threads(
    server_url: str, client: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    """list(None) kept the next id of every thread to merge them newest first (about 700 B
    a thread: 13.8 MB at 20,000 threads). Without a limit it now goes thread by thread, and
    with one it keeps the newest `limit` ids: the client's memory is the same over 3,000
    threads as over 300 (a SCAN step's keys, one round trip's pages or ids)."""
    # (small SCAN steps: they do not count)
    peaks: dict[int, dict[str, int]] = {}
    for threads in (300, 3000):
        prefix = new_prefix()
        try:
            with saver_with_limits(server_url, Limits(scan_count=100), prefix=prefix) as saver:
                ids = many_threads(saver, threads, 2)
                count, peaks.setdefault(threads, {})["all"] = peak_of(saver)
                assert count == len(ids)
                count, peaks[threads]["limit"] = peak_of(saver, limit=10)
                assert count == 10
                count, peaks[threads]["filter"] = peak_of(saver, filter={"step": 1})
                assert count == threads
        finally:
            forget_prefix(client, prefix)
    for kind in ("all", "limit", "filter"):
        small, large = peaks[300][kind], peaks[3000][kind]
        # (before: over 2 MB more at 3,000 threads than at 300)
        assert large < small * 1.5 + 100_000, (kind, peaks)


def test_list_none_of_an_empty_store(saver: RedisSaver) -> None:
    for limit in (None, 0, 1, 10):
        assert list(saver.list(None, limit=limit)) == []
        assert list(saver.list(None, filter={"step": 1}, limit=limit)) == []
        assert list(saver.list(None, filter={"user_id": "u"}, limit=limit)) == []


def test_list_none_limits_and_before(saver: RedisSaver) -> None:
    ids = many_threads(saver, 30, 3)
    assert thread_by_thread(saver.list(None)) == ids
    for limit in (0, 1, 2, 89, 90, 91, 200):
        assert [t.checkpoint["id"] for t in saver.list(None, limit=limit)] == ids[:limit]
    before = cfg("any", checkpoint_id=ids[40])
    assert thread_by_thread(saver.list(None, before=before)) == ids[41:]
    for limit in (1, 49, 50):
        got = [t.checkpoint["id"] for t in saver.list(None, before=before, limit=limit)]
        assert got == ids[41 : 41 + limit]
    steps = {t.checkpoint["id"] for t in saver.list(None, filter={"step": 2})}
    got = [t.checkpoint["id"] for t in saver.list(None, filter={"step": 2}, limit=5)]
    assert got == [i for i in ids if i in steps][:5]


def test_list_none_goes_thread_by_thread_in_pages(
    saver: RedisSaver, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Threads longer than a first page, in groups smaller than the store, several namespaces
    per thread, and a thread with more namespaces than one call merges."""
    made: dict[str, list[str]] = {}
    for n in range(7):
        for step in range(9):
            ns = "" if step % 3 else f"sub{step % 2}"
            made.setdefault(f"p{n}", []).extend(chain(saver, f"p{n}", [{"s": step}], ns=ns))
    for k in range(5):
        made["wide"] = made.get("wide", []) + chain(saver, "wide", [{"s": k}], ns=f"w{k}")
    set_limits(monkeypatch, saver, first_page=2, thread_group=3, list_page=4, namespace_chunk=2)
    expected = sorted((i for ids in made.values() for i in ids), reverse=True)
    assert thread_by_thread(saver.list(None)) == expected
    assert [t.checkpoint["id"] for t in saver.list(None, limit=11)] == expected[:11]
    odd = {i for ids in made.values() for i in ids[1::2]}
    got = thread_by_thread(saver.list(None, filter={"s": 1}))
    assert got == sorted(t.checkpoint["id"] for t in saver.list(None, filter={"s": 1}))[::-1]
    assert {"p0"} <= {t.config["configurable"]["thread_id"] for t in saver.list(None)}
    assert odd  # (the chains are long enough for pages of 4)


def test_a_thread_deleted_while_list_none_runs(
    saver: RedisSaver, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A thread deleted mid-listing gives at most what was read of it before (its next page
    finds it gone); the other threads come whole."""
    made = {f"d{n}": chain(saver, f"d{n}", [{"s": s} for s in range(10)]) for n in range(5)}
    set_limits(monkeypatch, saver, first_page=4, thread_group=2, list_page=3)
    listing = saver.list(None)
    first = next(listing)
    current = first.config["configurable"]["thread_id"]
    saver.delete_thread(current)
    rest = list(listing)
    got: dict[str, list[str]] = {}
    for t in [first, *rest]:
        got.setdefault(t.config["configurable"]["thread_id"], []).append(t.checkpoint["id"])
    assert len(got.pop(current)) <= 4  # its first page only
    assert got == {t: ids[::-1] for t, ids in made.items() if t != current}
    thread_by_thread([first, *rest])


def test_list_none_with_a_limit_makes_up_for_checkpoints_deleted_after_it_chose_them(
    saver: RedisSaver, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With a limit the newest ids are chosen first and their records read after: a
    checkpoint gone in between is replaced by the next newest, so the answer stays that of
    the store as it is read."""
    made = {f"c{n}": chain(saver, f"c{n}", [{"s": s} for s in range(3)]) for n in range(6)}
    select = listing.select_newest
    deleted: list[str] = []

    def select_then_delete(core: Any, *args: Any) -> Any:
        chosen = yield from select(core, *args)
        if not deleted:  # the thread of the newest chosen goes, once
            newest = max(chosen, key=lambda e: e.id)
            deleted.append(newest.thread)
            saver.delete_thread(newest.thread)
        return chosen

    monkeypatch.setattr(listing, "select_newest", select_then_delete)
    got = [t.checkpoint["id"] for t in saver.list(None, limit=5)]
    left = sorted((i for t, ids in made.items() if t not in deleted for i in ids), reverse=True)
    assert got == left[:5]


def test_list_none_with_a_limit_takes_a_thread_that_scan_yields_twice_once(
    saver: RedisSaver, monkeypatch: pytest.MonkeyPatch
) -> None:
    made = {f"s{n}": chain(saver, f"s{n}", [{"s": s} for s in range(2)]) for n in range(4)}
    expected = sorted((i for ids in made.values() for i in ids), reverse=True)
    scanned = discovery.scanned_threads

    def twice(core: Any) -> Any:
        chunks = [sorted(made), sorted(made)]
        inner = scanned(core)

        def next_threads() -> Any:
            yield from inner()  # (the SCAN requests, for what they are)
            return chunks.pop() if chunks else None

        return next_threads

    monkeypatch.setattr(discovery, "scanned_threads", twice)
    for limit in (1, 3, 8, 9):
        assert [t.checkpoint["id"] for t in saver.list(None, limit=limit)] == expected[:limit]


async def test_the_thread_backed_alist_and_the_loop_backed_list_stream_a_page_at_a_time(
    server_url: str, client: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    """RedisSaver.alist ran list() whole in a worker thread, and AsyncRedisSaver.list (from
    another thread) alist() whole on the loop, before handing out the first checkpoint: every
    checkpoint of a listing in memory at once. They now go a page (100) at a time."""
    import asyncio

    from langgraph.checkpoint.rediskv import AsyncRedisSaver

    decoded: list[int] = []
    decode = codec.Codec.decode_record

    def counted(self: Any, thread_id: str, record: Any, *args: Any, **kwargs: Any) -> Any:
        decoded.append(1)
        return decode(self, thread_id, record, *args, **kwargs)

    prefix = new_prefix()
    try:
        with RedisSaver(server_url, prefix=prefix) as saver:
            ids = many_threads(saver, 5, 50)
            monkeypatch.setattr(codec.Codec, "decode_record", counted)
            got = []
            async for t in saver.alist(None, limit=250):
                if not got:
                    assert len(decoded) <= 100  # (was 250)
                got.append(t.checkpoint["id"])
            assert got == ids
        async with AsyncRedisSaver(server_url, prefix=prefix) as async_saver:
            await async_saver.aget_tuple(cfg("m0"))  # (the saver's loop is this one)
            decoded.clear()

            def from_a_thread() -> list[str]:
                out = []
                for t in async_saver.list(None, limit=250):
                    if not out:
                        assert len(decoded) <= 100
                    out.append(t.checkpoint["id"])
                return out

            assert await asyncio.to_thread(from_a_thread) == ids
    finally:
        forget_prefix(client, prefix)


def test_checkpoints_keep_last_hides_are_not_chosen_by_a_limited_listing(
    saver: RedisSaver, client: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Review: list(None, limit) chooses ids first; the ids-only pages did not see the field h
    that keep_last sets on the checkpoints it keeps only for newer ones' delta channels, so
    each hidden one chosen was found gone when its record was read, and the choosing began
    again: a SCAN of the whole store per hidden checkpoint (794 requests here, 199 SCANs)."""
    old = chain(saver, "b", [{}])
    ids = chain(saver, "a", [{}] * 200)
    keys = KeySchema(saver.prefix)
    for checkpoint_id in ids[:-2]:
        set_record_field(client, keys.checkpoint(keys.tag("a"), "", checkpoint_id), "h", b"1")
    sent: list[Any] = []
    send = saver._send
    monkeypatch.setattr(saver, "_send", lambda request: sent.append(request) or send(request))
    assert [t.checkpoint["id"] for t in saver.list(None, limit=3)] == [ids[-1], ids[-2], old[0]]
    scans = [r for r in sent if isinstance(r, ScanPage)]
    # one pass over the store (its steps: the server may hold other prefixes' keys), and a
    # few script calls
    assert sum(r.cursor == "" for r in scans) == 1 and len(sent) - len(scans) <= 5, sent
