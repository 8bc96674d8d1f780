"""Inputs far beyond what a script can unpack at once (issue 27, defects 1 and 2).

Lua's unpack() fails beyond about 8,000 values ("too many results to unpack"), and a script
that fails midway keeps what it did. A record's refs, a thread's run list, the runs a caller
names: each is unbounded, so each goes to the server in chunks. These tests use ten times the
size that broke, with small random values (nothing compresses them), and assert exact results.
"""

from __future__ import annotations

import os
from typing import Any

import pytest
import redis

from langgraph.checkpoint.rediskv import RedisSaver
from langgraph.checkpoint.rediskv.core import Batch, ScriptCall

from ..conftest import data_keys, set_limits
from ..integration.test_contract import cfg, make_checkpoint

# refs in one record: a store of 100,000 channels (8,000 broke)
WIDE = 100_000
# runs of one thread, half of which one delete_for_runs names (8,000 named broke)
RUNS = 20_000


def put_wide(saver: RedisSaver, thread: str, count: int, channels: int) -> list[dict[str, Any]]:
    """`count` checkpoints of `channels` channels each, every channel new at every step (a
    value of 8 random bytes), checkpoint i written by run "r<i>"; returns their values."""
    parent: str | None = None
    puts: list[dict[str, Any]] = []
    for i in range(count):
        versions = {f"c{j}": f"{i + 1:08d}" for j in range(channels)}
        values = {f"c{j}": os.urandom(8) for j in range(channels)}
        checkpoint = make_checkpoint(values, versions)
        metadata = {"source": "loop", "step": i, "run_id": f"r{i}"}
        saver.put(cfg(thread, "", parent), checkpoint, metadata, versions)
        parent = checkpoint["id"]
        puts.append({"id": parent, "values": values})
    return puts


def stored_values(saver: RedisSaver, thread: str, checkpoint_id: str) -> dict[str, Any]:
    got = saver.get_tuple(cfg(thread, "", checkpoint_id))
    assert got is not None, checkpoint_id
    return dict(got.checkpoint["channel_values"])


def blob_count(client: redis.Redis, prefix: str) -> int:
    return sum(1 for _ in client.scan_iter(match=f"{prefix}:blob:*", count=5000))


@pytest.mark.slow
def test_prune_of_records_of_100k_refs_keeps_the_latest_and_the_thread_usable(
    saver: RedisSaver, client: redis.Redis, prefix: str
) -> None:
    """prune unpacked all of the latest record's refs at once: past ~8,000 it failed, its job
    stayed in the gc root, and every later put and delete_thread of the thread failed too."""
    puts = put_wide(saver, "t", 2, WIDE)
    saver.prune(["t"])
    assert [c.config["configurable"]["checkpoint_id"] for c in saver.list(cfg("t"))] == [
        puts[1]["id"]
    ]
    assert stored_values(saver, "t", puts[1]["id"]) == puts[1]["values"]
    assert blob_count(client, prefix) == WIDE
    # the thread takes writes again, and goes whole
    checkpoint = make_checkpoint({"x": 1}, {"x": "00000001"})
    saver.put(cfg("t", "", puts[1]["id"]), checkpoint, {"source": "loop", "step": 2}, {"x": "1"})
    saver.delete_thread("t")
    assert data_keys(client, prefix) == []


@pytest.mark.slow
def test_delete_for_runs_of_records_of_100k_refs_drops_the_run_and_keeps_the_rest(
    saver: RedisSaver, client: redis.Redis, prefix: str
) -> None:
    """delete_for_runs unpacked every ref of a remaining record at once while it walked the
    namespace: past ~8,000 it failed and left the job pending (the thread unusable)."""
    puts = put_wide(saver, "t", 2, WIDE)
    saver.delete_for_runs(["r0"])
    listed = [c.config["configurable"]["checkpoint_id"] for c in saver.list(cfg("t"))]
    assert listed == [puts[1]["id"]]
    assert stored_values(saver, "t", puts[1]["id"]) == puts[1]["values"]
    assert blob_count(client, prefix) == WIDE
    saver.delete_thread("t")
    assert data_keys(client, prefix) == []


def test_prune_of_a_record_of_values_stored_against_10k_bases(
    saver: RedisSaver, client: redis.Redis, prefix: str
) -> None:
    """A value of 1 KB or more stored against its base names the base too: 10,000 such
    channels make 20,000 refs in one record (4,500 broke)."""
    channels = 10_000
    bases = {f"c{j}": os.urandom(1100) for j in range(channels)}
    grown = {name: value + os.urandom(40) for name, value in bases.items()}
    ids = []
    parent: str | None = None
    for step, values in enumerate((bases, grown)):
        versions = {name: f"{step + 1:08d}" for name in values}
        checkpoint = make_checkpoint(values, versions)
        metadata = {"source": "loop", "step": step, "run_id": f"r{step}"}
        saver.put(cfg("t", "", parent), checkpoint, metadata, versions)
        parent = checkpoint["id"]
        ids.append(parent)
    against_bases = sum(
        1
        for key in client.scan_iter(match=f"{prefix}:blob:*:00000002", count=5000)
        if (client.get(key) or b"").startswith(b"zr:")
    )
    assert against_bases == channels
    saver.prune(["t"])
    assert [c.config["configurable"]["checkpoint_id"] for c in saver.list(cfg("t"))] == [ids[1]]
    assert stored_values(saver, "t", ids[1]) == grown
    assert blob_count(client, prefix) == 2 * channels  # the values and their bases
    saver.delete_thread("t")
    assert data_keys(client, prefix) == []


def put_runs(saver: RedisSaver, thread: str, count: int) -> list[str]:
    """A chain of `count` checkpoints, each written by its own run "run<i>", sent in
    pipelines (one round trip each would take minutes); returns their ids."""
    core = saver._core
    calls: list[ScriptCall] = []
    ids: list[str] = []
    parent: str | None = None
    for i in range(count):
        versions = {"n": f"{i + 1:08d}"}
        checkpoint = make_checkpoint({"n": os.urandom(8)}, versions)
        metadata = {"source": "loop", "step": i, "run_id": f"run{i}"}
        op = core.put(cfg(thread, "", parent), checkpoint, metadata, versions)
        request = next(op)
        # requests before the put itself (registering the metadata index ...) go one by one
        while not (isinstance(request, ScriptCall) and request.name == "put_checkpoint"):
            request = op.send(saver._send(request))
        calls.append(request)
        parent = checkpoint["id"]
        ids.append(parent)
    for start in range(0, len(calls), 1000):
        replies = saver._send(Batch(calls[start : start + 1000]))
        assert all(not isinstance(r, bytes) for r in replies), replies[:3]
    return ids


@pytest.mark.slow
def test_delete_for_runs_of_many_runs_of_one_thread_deletes_exactly_them(
    saver: RedisSaver, client: redis.Redis, prefix: str
) -> None:
    """delete_for_runs unpacked every run of the thread it was given at once: 8,000 runs
    raised a Lua error and deleted nothing. Here 10,000 of the thread's 20,000 runs, named
    among 40,000 run ids (the others no thread has) go, and only they."""
    runs, keys = RUNS, saver._core.keys
    ids = put_runs(saver, "t", runs)
    named = [f"run{i}" for i in range(0, runs, 2)] + [f"other{i}" for i in range(30_000)]
    saver.delete_for_runs(named)
    listed = [c.config["configurable"]["checkpoint_id"] for c in saver.list(cfg("t"))]
    assert listed == ids[1::2][::-1]
    assert sorted(m.decode() for m in client.smembers(keys.runs(keys.tag("t")))) == sorted(
        f"run{i}" for i in range(1, runs, 2)
    )
    assert blob_count(client, prefix) == runs // 2
    saver.delete_thread("t")
    assert data_keys(client, prefix) == []


def test_run_ids_go_in_chunks_that_join_one_job(
    saver: RedisSaver, client: redis.Redis, prefix: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Run ids go Limits.run_chunk per call; calls but the last only stage their runs (no job yet),
    the last makes them the thread's one runs job (one walk of each namespace for all the
    runs) and reaps it."""
    set_limits(monkeypatch, saver, run_chunk=2)
    ids = put_runs(saver, "t", 6)
    keys = saver._core.keys
    gc = keys.gc(keys.tag("t"))
    jobs: list[tuple[int, list[str]]] = []
    send = saver._send

    def watching(request: Any) -> Any:
        reply = send(request)
        if getattr(request, "name", "") == "delete_for_runs":
            budget = int(request.args[2])
            jobs.append((budget, sorted(m.decode() for m in client.smembers(gc))))
        return reply

    monkeypatch.setattr(saver, "_send", watching)
    saver.delete_for_runs(["run0", "run2", "run4", "run5", "gone"])
    assert jobs == [(0, []), (0, []), (1000, [])]
    listed = [c.config["configurable"]["checkpoint_id"] for c in saver.list(cfg("t"))]
    assert listed == [ids[3], ids[1]]
