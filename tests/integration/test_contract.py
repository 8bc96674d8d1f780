"""The checkpointer contract beyond the conformance suite: exact filters, ordering, paging,
write semantics, storage layout and the extended operations."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterable
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
import redis
from langgraph.checkpoint.base import (
    ERROR,
    INTERRUPT,
    Checkpoint,
    CheckpointTuple,
    empty_checkpoint,
)
from langgraph.checkpoint.base.id import uuid6

from langgraph.checkpoint.rediskv import AsyncRedisSaver, CheckpointLostError, RedisSaver
from langgraph.checkpoint.rediskv.keys import KeySchema, metadata_index_suffix

from ..clock import expire_record
from ..conftest import data_keys, keys_of, set_limits


def cfg(thread_id: str, ns: str = "", checkpoint_id: str | None = None, **extra: Any) -> Any:
    configurable: dict[str, Any] = {"thread_id": thread_id, "checkpoint_ns": ns, **extra}
    if checkpoint_id:
        configurable["checkpoint_id"] = checkpoint_id
    return {"configurable": configurable}


def make_checkpoint(values: dict[str, Any], versions: dict[str, Any]) -> Checkpoint:
    checkpoint = empty_checkpoint()
    checkpoint["id"] = str(uuid6(clock_seq=-1))
    checkpoint["channel_values"] = dict(values)
    checkpoint["channel_versions"] = dict(versions)
    return checkpoint


def chain(
    saver: RedisSaver, thread_id: str, metadatas: list[dict[str, Any]], ns: str = ""
) -> list[str]:
    """Put one checkpoint per metadata, each the child of the previous; returns their ids."""
    ids: list[str] = []
    version = None
    for md in metadatas:
        version = saver.get_next_version(version, None)
        checkpoint = make_checkpoint({"n": len(ids)}, {"n": version})
        parent = ids[-1] if ids else None
        saver.put(cfg(thread_id, ns, parent), checkpoint, md, {"n": version})
        ids.append(checkpoint["id"])
    return ids


def listed_ids(saver: RedisSaver, config: Any, **kw: Any) -> list[str]:
    return [t.checkpoint["id"] for t in saver.list(config, **kw)]


def thread_by_thread(tuples: Iterable[CheckpointTuple]) -> list[str]:
    """The ids of a list(None) without a limit, newest first, once checked to come thread by
    thread: each thread's checkpoints together, newest first."""
    ids: list[str] = []
    threads: list[str] = []
    for t in tuples:
        thread_id = t.config["configurable"]["thread_id"]
        if threads and threads[-1] == thread_id:
            assert t.checkpoint["id"] < ids[-1], f"thread {thread_id!r}: not newest first"
        else:
            assert thread_id not in threads, f"thread {thread_id!r} comes twice"
            threads.append(thread_id)
        ids.append(t.checkpoint["id"])
    return sorted(ids, reverse=True)


def any_listing(tuples: Iterable[CheckpointTuple]) -> list[str]:
    """The ids of a list(None) without a limit, newest first, once checked to come in an
    order it may: newest first (a filter on an indexed key reads its index), or thread by
    thread."""
    got = list(tuples)
    ids = [t.checkpoint["id"] for t in got]
    return ids if ids == sorted(ids, reverse=True) else thread_by_thread(got)


# -- metadata filters ---------------------------------------------------------------------
def test_filter_is_exact_on_types_nesting_and_none(saver: RedisSaver) -> None:
    ids = chain(
        saver,
        "t",
        [
            {"source": "input", "step": 7},
            {"source": "loop", "step": "7"},
            {"source": "loop", "step": 7.0, "extra": None},
            {"source": "loop", "step": 8, "nested": {"a": [1, 2], "b": {"c": None}}},
            {"source": "loop", "step": 9, "flag": True},
            {"source": "loop", "step": 10, "flag": 1},
        ],
    )
    newest_first = ids[::-1]

    def matching(f: dict[str, Any]) -> list[str]:
        return listed_ids(saver, cfg("t"), filter=f)

    assert matching({"step": 7}) == [ids[2], ids[0]]  # 7.0 == 7, as in Python
    assert matching({"step": "7"}) == [ids[1]]
    assert matching({"nested": {"b": {"c": None}, "a": [1, 2]}}) == [ids[3]]
    assert matching({"nested": {"a": [2, 1], "b": {"c": None}}}) == []
    assert matching({"nested": {"a": [1, 2]}}) == []  # whole values, not sub-documents
    # None matches a stored None and a missing key, as InMemorySaver does
    assert matching({"extra": None}) == newest_first
    assert matching({"flag": True}) == [ids[4]]
    assert matching({"flag": 1}) == [ids[5]]  # JSON types: true is not 1
    assert matching({"source": "loop", "step": 8}) == [ids[3]]
    assert matching({"source": "input", "step": 8}) == []
    assert matching({"missing": "x"}) == []
    assert matching({}) == newest_first


def test_metadata_is_stored_whole_with_keys_from_the_config(saver: RedisSaver) -> None:
    config = {
        "configurable": {"thread_id": "t", "checkpoint_ns": "", "user_id": "u-1", "__secret": "x"},
        "metadata": {"tenant": "acme", "priority": 3},
    }
    checkpoint = make_checkpoint({}, {})
    md = {"source": "input", "step": -1, "parents": {}, "custom": {"deep": [1, {"x": None}]}}
    saver.put(config, checkpoint, md, {})  # type: ignore[arg-type]
    tup = saver.get_tuple(cfg("t"))
    assert tup is not None
    assert tup.metadata == {
        "source": "input",
        "step": -1,
        "parents": {},
        "custom": {"deep": [1, {"x": None}]},
        "user_id": "u-1",
        "tenant": "acme",
        "priority": 3,
    }
    assert listed_ids(saver, None, filter={"user_id": "u-1", "priority": 3}) == [checkpoint["id"]]


# -- ordering and paging ---------------------------------------------------------------------
def test_list_order_before_and_limit(saver: RedisSaver) -> None:
    ids = chain(saver, "t", [{"step": i} for i in range(6)])
    assert listed_ids(saver, cfg("t")) == ids[::-1]
    assert listed_ids(saver, cfg("t"), limit=2) == [ids[5], ids[4]]
    assert listed_ids(saver, cfg("t"), before=cfg("t", checkpoint_id=ids[3])) == [
        ids[2],
        ids[1],
        ids[0],
    ]
    assert listed_ids(saver, cfg("t"), before=cfg("t", checkpoint_id=ids[3]), limit=1) == [ids[2]]
    assert listed_ids(saver, cfg("t", checkpoint_id=ids[2])) == [ids[2]]
    assert listed_ids(saver, cfg("t"), limit=0) == []
    tup = next(iter(saver.list(cfg("t"), limit=1)))
    assert tup.parent_config == cfg("t", checkpoint_id=ids[4])
    assert tup.checkpoint["channel_values"] == {"n": 5}


def test_list_pages_through_long_histories_with_selective_filters(saver: RedisSaver) -> None:
    # 2,300 checkpoints: more than a page (100) and more than one scan budget (2,000), with
    # the only matches at the very beginning of the history
    metadatas = [{"step": i, "mark": i < 3} for i in range(2300)]
    ids = chain(saver, "t", metadatas)
    assert listed_ids(saver, cfg("t")) == ids[::-1]
    assert listed_ids(saver, cfg("t"), filter={"mark": True}) == [ids[2], ids[1], ids[0]]
    assert listed_ids(saver, cfg("t"), filter={"mark": True}, limit=2) == [ids[2], ids[1]]
    assert listed_ids(saver, cfg("t"), limit=150)[-1] == ids[-150]


def test_list_merges_namespaces_newest_first(saver: RedisSaver) -> None:
    root = chain(saver, "t", [{"step": 0}])
    child = chain(saver, "t", [{"step": 0}, {"step": 1}], ns="child:1")
    root += chain(saver, "t", [{"step": 1}])
    both = sorted(root + child, reverse=True)
    assert listed_ids(saver, {"configurable": {"thread_id": "t"}}) == both
    assert listed_ids(saver, cfg("t", ns="child:1")) == child[::-1]
    assert listed_ids(saver, cfg("t")) == sorted(root, reverse=True)
    namespaces = [
        t.config["configurable"]["checkpoint_ns"]
        for t in saver.list({"configurable": {"thread_id": "t"}})
    ]
    assert namespaces == ["" if i in root else "child:1" for i in both]


def test_list_none_searches_every_thread_newest_first(saver: RedisSaver) -> None:
    a = chain(saver, "a", [{"user_id": "u1"}, {"user_id": "u2"}])
    b = chain(saver, "b", [{"user_id": "u1"}])
    a += chain(saver, "a", [{"user_id": "u1"}])
    all_ids = sorted(a + b, reverse=True)
    # without a limit, thread by thread (as InMemorySaver): memory stays bounded
    assert thread_by_thread(saver.list(None)) == all_ids
    for limit in range(1, 6):  # with one, the newest of all
        assert listed_ids(saver, None, limit=limit) == all_ids[:limit]
    flt = {"user_id": "u1"}
    assert listed_ids(saver, None, filter=flt, limit=3) == [a[2], b[0], a[0]]
    assert thread_by_thread(saver.list(None, filter=flt)) == [a[2], b[0], a[0]]
    before = cfg("x", checkpoint_id=a[2])
    assert listed_ids(saver, None, filter=flt, before=before, limit=5) == [b[0], a[0]]
    assert thread_by_thread(saver.list(None, filter=flt, before=before)) == [b[0], a[0]]
    threads = [t.config["configurable"]["thread_id"] for t in saver.list(None, limit=10)]
    assert threads == ["a", "b", "a", "a"]
    threads = [t.config["configurable"]["thread_id"] for t in saver.list(None)]
    assert threads in (["a", "a", "a", "b"], ["b", "a", "a", "a"])


async def test_async_list_none_matches_sync(async_saver: AsyncRedisSaver, server_url: str) -> None:
    with RedisSaver(server_url, prefix=async_saver.prefix) as sync_saver:
        ids = chain(sync_saver, "a", [{"k": 1}, {"k": 2}]) + chain(sync_saver, "b", [{"k": 1}])
        got = [t async for t in async_saver.alist(None, filter={"k": 1})]
        assert thread_by_thread(got) == sorted([ids[0], ids[2]], reverse=True)
        assert thread_by_thread(got) == thread_by_thread(sync_saver.list(None, filter={"k": 1}))
        got_ids = [t.checkpoint["id"] async for t in async_saver.alist(None, limit=2)]
        assert got_ids == listed_ids(sync_saver, None, limit=2)


# -- writes ------------------------------------------------------------------------------------
def test_put_writes_first_wins_special_channels_upsert_and_sort_by_task_path(
    saver: RedisSaver,
) -> None:
    (cid,) = chain(saver, "t", [{"step": 0}])
    config = cfg("t", checkpoint_id=cid)
    # task ids sort in the opposite order of their paths: the path must decide
    saver.put_writes(config, [("a", 1), ("b", 2)], "task-z", "~path-a")
    saver.put_writes(config, [("a", 3)], "task-a", "~path-b")
    saver.put_writes(config, [("a", 99), ("b", 99)], "task-z", "~path-a")  # retry: first wins
    saver.put_writes(config, [(ERROR, "boom")], "task-a", "~path-b")
    saver.put_writes(config, [(ERROR, "boom again")], "task-a", "~path-b")  # special: upsert
    saver.put_writes(config, [(INTERRUPT, {"q": 1})], "task-i", "")
    tup = saver.get_tuple(config)
    assert tup is not None
    assert tup.pending_writes == [
        ("task-i", INTERRUPT, {"q": 1}),  # no path sorts first
        ("task-z", "a", 1),
        ("task-z", "b", 2),
        ("task-a", ERROR, "boom again"),  # idx -1 before idx 0
        ("task-a", "a", 3),
    ]


# -- storage -------------------------------------------------------------------------------
def test_blobs_written_once_per_version_as_raw_serializer_bytes(
    saver: RedisSaver, client: redis.Redis
) -> None:
    keys = KeySchema(saver.prefix)
    tag = keys.tag("t")
    v1, w1 = saver.get_next_version(None, None), saver.get_next_version(None, None)
    first = make_checkpoint({"a": "A1", "b": b"\x00raw"}, {"a": v1, "b": w1})
    saver.put(cfg("t"), first, {"step": 0}, {"a": v1, "b": w1})
    v2 = saver.get_next_version(v1, None)
    second = make_checkpoint({"a": "A2", "b": b"\x00raw"}, {"a": v2, "b": w1})
    saver.put(cfg("t", checkpoint_id=first["id"]), second, {"step": 1}, {"a": v2})

    blob_keys = keys_of(client, f"{saver.prefix}:blob:*")
    assert blob_keys == sorted(
        [keys.blob(tag, "", "a", v1), keys.blob(tag, "", "a", v2), keys.blob(tag, "", "b", w1)]
    )
    type_a, data_a = saver.serde.dumps_typed("A2")
    assert client.get(keys.blob(tag, "", "a", v2)) == type_a.encode() + b"\0" + data_a
    assert client.get(keys.blob(tag, "", "b", w1)) == b"bytes\0\x00raw"
    old = saver.get_tuple(cfg("t", checkpoint_id=first["id"]))
    new = saver.get_tuple(cfg("t"))
    assert old is not None and new is not None
    assert old.checkpoint["channel_values"] == {"a": "A1", "b": b"\x00raw"}
    assert new.checkpoint["channel_values"] == {"a": "A2", "b": b"\x00raw"}


def test_versions_are_unique_across_forks(saver: RedisSaver) -> None:
    base = saver.get_next_version(None, None)
    forks = {saver.get_next_version(base, None) for _ in range(50)}
    assert len(forks) == 50
    assert all(v > base for v in forks)
    assert all(v.split(".")[0] == f"{2:016}" for v in forks)


def test_a_fork_never_changes_a_stored_checkpoint(saver: RedisSaver) -> None:
    v1 = saver.get_next_version(None, None)
    root = make_checkpoint({"x": "root"}, {"x": v1})
    saver.put(cfg("t"), root, {"step": 0}, {"x": v1})
    children = []
    for label in ["left", "right"]:  # two runs resumed from the same checkpoint
        v = saver.get_next_version(v1, None)
        child = make_checkpoint({"x": label}, {"x": v})
        saver.put(cfg("t", checkpoint_id=root["id"]), child, {"step": 1}, {"x": v})
        children.append(child["id"])
    values = {
        cid: saver.get_tuple(cfg("t", checkpoint_id=cid)).checkpoint["channel_values"]  # type: ignore[union-attr]
        for cid in [root["id"], *children]
    }
    assert values == {
        root["id"]: {"x": "root"},
        children[0]: {"x": "left"},
        children[1]: {"x": "right"},
    }


# -- extended operations ---------------------------------------------------------------------
def test_copy_thread_makes_an_independent_copy(saver: RedisSaver, client: redis.Redis) -> None:
    ids = chain(saver, "src", [{"run_id": "r1"}, {"run_id": "r2"}])
    saver.put_writes(cfg("src", checkpoint_id=ids[-1]), [("n", 5)], "task", "~p")
    saver.copy_thread("src", "dst")
    saver.delete_thread("src")
    assert keys_of(client, KeySchema(saver.prefix).thread_keys_pattern("src")) == []
    copied = list(saver.list(cfg("dst")))
    assert [t.checkpoint["id"] for t in copied] == ids[::-1]
    assert [t.checkpoint["channel_values"] for t in copied] == [{"n": 1}, {"n": 0}]
    assert copied[0].pending_writes == [("task", "n", 5)]
    assert copied[0].config["configurable"]["thread_id"] == "dst"
    saver.delete_for_runs(["r1"])  # the run index came along with the copy
    assert listed_ids(saver, cfg("dst")) == [ids[1]]


def test_delete_for_runs_keeps_blobs_that_survivors_use(
    saver: RedisSaver, client: redis.Redis
) -> None:
    v = saver.get_next_version(None, None)
    first = make_checkpoint({"shared": "S"}, {"shared": v})
    saver.put(cfg("t"), first, {"run_id": "old"}, {"shared": v})
    second = make_checkpoint({"shared": "S"}, {"shared": v})  # same version: shares the blob
    saver.put(cfg("t", checkpoint_id=first["id"]), second, {"run_id": "new"}, {})
    saver.delete_for_runs(["old"])
    tup = saver.get_tuple(cfg("t"))
    assert tup is not None and tup.checkpoint["channel_values"] == {"shared": "S"}
    assert listed_ids(saver, cfg("t")) == [second["id"]]
    saver.delete_for_runs(["new"])
    assert data_keys(client, saver.prefix) == []


def test_prune_keep_latest_leaves_exactly_the_latest(
    saver: RedisSaver, client: redis.Redis
) -> None:
    ids = chain(saver, "t", [{"step": i, "run_id": f"r{i}"} for i in range(4)])
    saver.put_writes(cfg("t", checkpoint_id=ids[0]), [("n", 0)], "old-task")
    saver.put_writes(cfg("t", checkpoint_id=ids[-1]), [("n", 9)], "new-task")
    saver.prune(["t"], strategy="keep_latest")
    keys = KeySchema(saver.prefix)
    tag = keys.tag("t")
    tup = saver.get_tuple(cfg("t"))
    assert tup is not None
    version = tup.checkpoint["channel_versions"]["n"]
    assert data_keys(client, saver.prefix) == sorted(
        [
            keys.thread(tag),
            keys.index(tag, ""),
            keys.ledger(tag, ""),
            keys.checkpoint(tag, "", ids[-1]),  # (with its writes in it)
            keys.blob(tag, "", "n", version),
            keys.runs(tag),
            keys.run(tag, "r3"),
            # the latest checkpoint's entries in the global metadata indexes; the others' went
            keys.metadata_index(metadata_index_suffix("run_id", '"r3"')),
        ]
    )
    # (no ttl: "0", under no ttl setting of the thread's own, "-")
    assert client.hgetall(keys.ledger(tag, "")) == {ids[-1].encode(): b"0 -"}
    assert tup.checkpoint["channel_values"] == {"n": 3}
    assert tup.pending_writes == [("new-task", "n", 9)]
    saver.prune(["t"], strategy="delete_all")
    assert data_keys(client, saver.prefix) == []


@pytest.mark.parametrize("strategy", ["keep_latest", "delete_all"])
async def test_async_prune_matches_sync(
    async_saver: AsyncRedisSaver, server_url: str, strategy: str
) -> None:
    with RedisSaver(server_url, prefix=async_saver.prefix) as sync_saver:
        ids = chain(sync_saver, "t", [{"step": i} for i in range(3)])
    await async_saver.aprune(["t"], strategy=strategy)
    left = [t.checkpoint["id"] async for t in async_saver.alist(cfg("t"))]
    assert left == ([ids[-1]] if strategy == "keep_latest" else [])


# -- regressions found by review: pages that meet incomplete checkpoints, huge filters --------
@pytest.mark.parametrize("namespaces", [None, ""])
def test_a_filtered_list_pages_past_incomplete_checkpoints(
    saver: RedisSaver, client: redis.Redis, namespaces: str | None
) -> None:
    """A checkpoint whose blob is gone (a blob expires with its record or after it: only an
    eviction takes it first) fails the list with CheckpointLostError, never a shorter
    history; one whose record is gone too (expired) is skipped without ending the page early
    or skipping what follows it."""
    keys = KeySchema(saver.prefix)
    tag = keys.tag("t")
    made = chain(saver, "t", [{"source": "loop", "step": i} for i in range(110)])
    broken = made[50]
    broken_version = saver.get_tuple(cfg("t", checkpoint_id=broken))
    assert broken_version is not None
    blob = keys.blob(tag, "", "n", broken_version.checkpoint["channel_versions"]["n"])
    client.unlink(blob)
    config = {"configurable": {"thread_id": "t"}}
    if namespaces is not None:
        config["configurable"]["checkpoint_ns"] = namespaces
    for filter in ({"source": "loop"}, None):
        with pytest.raises(CheckpointLostError) as lost:
            listed_ids(saver, config, filter=filter)
        assert (lost.value.thread_id, lost.value.what, lost.value.key) == ("t", "value", blob)
    expire_record(client, keys, tag, "", broken)
    expected = [i for i in made[::-1] if i != broken]
    assert listed_ids(saver, config, filter={"source": "loop"}) == expected
    assert listed_ids(saver, config) == expected
    for limit in (1, 59, 60, 61, 99, 100, 101, 109, 110):
        assert listed_ids(saver, config, filter={"source": "loop"}, limit=limit) == expected[:limit]


def test_a_filter_with_thousands_of_keys(saver: RedisSaver) -> None:
    wide = {f"k{i}": i for i in range(8000)}
    [match] = chain(saver, "t", [wide])
    chain(saver, "t", [{"k1": 1}])
    assert listed_ids(saver, cfg("t"), filter=wide) == [match]
    assert listed_ids(saver, None, filter=wide) == [match]
    assert listed_ids(saver, cfg("t"), filter={**wide, "k7999": 0}) == []


def test_list_of_every_thread_goes_past_a_long_stretch_the_filter_rejects(
    saver: RedisSaver,
) -> None:
    """A thread's first page may come back empty, with a cursor, when the filter rejects more
    checkpoints than one call examines: the merge must go on reading that thread."""
    [old] = chain(saver, "t", [{"topic": "billing"}])
    chain(saver, "t", [{"topic": "smalltalk"} for _ in range(2500)])
    [other] = chain(saver, "u", [{"topic": "billing"}])
    assert listed_ids(saver, cfg("t"), filter={"topic": "billing"}) == [old]
    assert listed_ids(saver, None, filter={"topic": "billing"}) == [other, old]


def test_filters_on_values_beyond_json_match_in_every_process(
    saver: RedisSaver, server_url: str
) -> None:
    """A set is written by a process with another hash seed (another iteration order); dicts
    holding datetimes come in other key orders; one instant is written in two time zones."""
    tags = {f"tag-{i}" for i in range(40)}
    writer = (
        "import sys\n"
        "from langgraph.checkpoint.rediskv import RedisSaver\n"
        "from tests.integration.test_contract import chain\n"
        f"with RedisSaver({server_url!r}, prefix={saver.prefix!r}) as s:\n"
        f"    print(chain(s, 'other-process', [{{'tags': set({sorted(tags)!r})}}])[0])\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", writer],
        env={**os.environ, "PYTHONHASHSEED": "12345"},
        cwd=Path(__file__).parents[2],
        capture_output=True,
        text=True,
        check=True,
    )
    written = done.stdout.strip()
    assert listed_ids(saver, None, filter={"tags": set(tags)}) == [written]
    assert listed_ids(saver, None, filter={"tags": frozenset(tags)}) == [written]

    when = datetime(2026, 11, 22, 9, 30, tzinfo=timezone.utc)
    berlin = when.astimezone(timezone(timedelta(hours=1)))
    [first] = chain(saver, "t", [{"event": {"at": when, "kind": "call"}}])
    [second] = chain(saver, "u", [{"event": {"kind": "call", "at": berlin}}])
    assert thread_by_thread(saver.list(None, filter={"event": {"kind": "call", "at": when}})) == [
        second,
        first,
    ]
    naive = when.replace(tzinfo=None)
    assert listed_ids(saver, None, filter={"event": {"kind": "call", "at": naive}}) == []


def test_a_thread_with_more_namespaces_than_one_call_reads(
    saver: RedisSaver, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Listing every namespace of a thread with thousands (subgraphs) is merged by the client
    from chunks of namespaces, so no call reads them all; here chunks of 7 of 30."""
    set_limits(monkeypatch, saver, namespace_chunk=7)
    made: list[str] = []
    for n in range(30):
        made += chain(
            saver, "t", [{"source": "loop", "step": s % 2} for s in range(3)], ns=f"sub{n}"
        )
    [other] = chain(saver, "u", [{"source": "loop", "step": 1}])
    newest_first = sorted(made, reverse=True)
    everything = {"configurable": {"thread_id": "t"}}
    assert listed_ids(saver, everything) == newest_first
    for limit in (1, 6, 7, 8, 89, 90, 91):
        assert listed_ids(saver, everything, limit=limit) == newest_first[:limit]
    middle = {"configurable": {"checkpoint_id": newest_first[40]}}
    assert listed_ids(saver, everything, before=middle) == newest_first[41:]
    odd = sorted(made[1::3], reverse=True)
    assert listed_ids(saver, everything, filter={"step": 1}) == odd
    # step has no global index: every thread is listed, this one in chunks (twice before a
    # fix, when a chunked thread's first page came back empty)
    expected = sorted([*odd, other], reverse=True)
    assert thread_by_thread(saver.list(None, filter={"step": 1})) == expected
    assert listed_ids(saver, None, filter={"step": 1}, limit=100) == expected
    for limit in (1, 7, 8):
        assert listed_ids(saver, None, filter={"step": 1}, limit=limit) == expected[:limit]
    one = {"configurable": {"thread_id": "t", "checkpoint_id": made[44]}}
    assert listed_ids(saver, one) == [made[44]]


def test_copy_onto_the_same_id_replaces_the_pending_writes_too(saver: RedisSaver) -> None:
    """Found by the model test: the copied record came with the target's old pending writes."""
    checkpoint = make_checkpoint({"n": "source"}, {"n": "1"})
    saver.put(cfg("src"), checkpoint, {}, {"n": "1"})
    saver.put(cfg("dst"), checkpoint, {}, {"n": "1"})
    saver.put_writes(cfg("dst", checkpoint_id=checkpoint["id"]), [("n", "stale")], "task-a")
    saver.copy_thread("src", "dst")
    tup = saver.get_tuple(cfg("dst"))
    assert tup is not None and tup.pending_writes == []
    saver.put_writes(cfg("src", checkpoint_id=checkpoint["id"]), [("n", "fresh")], "task-b")
    saver.copy_thread("src", "dst")
    tup = saver.get_tuple(cfg("dst"))
    assert tup is not None and tup.pending_writes == [("task-b", "n", "fresh")]
    assert saver.check_invariants() == []


def test_copy_onto_the_same_id_under_another_run_takes_it_out_of_the_old_run(
    saver: RedisSaver, client: redis.Redis
) -> None:
    """Found by the cluster model test: a copy replacing a record that another run wrote
    left it in that run's index, so delete_for_runs of that run deleted the copied
    checkpoint, which the copy says another run wrote."""
    checkpoint = make_checkpoint({"n": "x"}, {"n": "1"})
    saver.put(cfg("src"), checkpoint, {"run_id": "kept"}, {"n": "1"})
    saver.put(cfg("dst"), checkpoint, {"run_id": "gone"}, {"n": "1"})
    saver.copy_thread("src", "dst")
    keys = KeySchema(saver.prefix)
    tag = KeySchema.tag("dst")
    assert client.exists(keys.run(tag, "gone")) == 0
    assert client.smembers(keys.runs(tag)) == {b"kept"}
    saver.delete_for_runs(["gone"])
    assert listed_ids(saver, cfg("dst")) == [checkpoint["id"]]
    saver.delete_for_runs(["kept"])
    assert listed_ids(saver, cfg("dst")) == [] and listed_ids(saver, cfg("src")) == []
    assert saver.check_invariants() == []


def test_delete_for_runs_skips_a_stale_run_entry(saver: RedisSaver, client: redis.Redis) -> None:
    """A store where an earlier version's copy left a replaced record in its old run's index:
    delete_for_runs of that run takes only the checkpoints whose record names it."""
    ids = chain(saver, "t", [{"run_id": "a"}, {"run_id": "b"}])
    keys = KeySchema(saver.prefix)
    tag = KeySchema.tag("t")
    client.sadd(keys.run(tag, "a"), f":{ids[1]}")  # as the earlier version's copy left it
    saver.delete_for_runs(["a"])
    assert listed_ids(saver, cfg("t")) == [ids[1]]
    assert client.exists(keys.run(tag, "a")) == 0
    assert saver.check_invariants() == []


def test_putting_a_checkpoint_again_under_another_run_leaves_no_empty_run(
    saver: RedisSaver,
) -> None:
    """Found by the model test: the old run stayed listed in the thread's runs without its
    run index (a put's random sweep of two runs seldom met it among 200)."""
    chain(saver, "t", [{"run_id": f"other-{i}"} for i in range(200)])
    checkpoint = make_checkpoint({"n": 1}, {"n": "1"})
    saver.put(cfg("t"), checkpoint, {"run_id": "first"}, {"n": "1"})
    saver.put(cfg("t"), checkpoint, {"run_id": "second"}, {"n": "1"})
    assert saver.check_invariants() == []
    saver.delete_for_runs(["first"])
    assert listed_ids(saver, cfg("t"), limit=1) == [checkpoint["id"]]
