"""The global metadata index behind list(None, filter=...): the same answers as a scan of
every thread, at the cost of what it finds, and kept in step by every operation."""

from __future__ import annotations

from typing import Any

import pytest
import redis

from langgraph.checkpoint.rediskv import RedisSaver
from langgraph.checkpoint.rediskv.keys import KeySchema, metadata_index_suffix

from ..clock import advance_time
from ..conftest import RoundTrips, keys_of
from .test_contract import any_listing, cfg, chain

INDEXED = ("source", "step", "run_id", "user_id")


def ids(saver: RedisSaver, **kw: Any) -> list[str]:
    """Newest first: with a limit as listed, without one sorted (a scan comes thread by
    thread)."""
    if kw.get("limit") is not None:
        return [t.checkpoint["id"] for t in saver.list(None, **kw)]
    return any_listing(saver.list(None, **kw))


def populate(saver: RedisSaver) -> list[str]:
    made = []
    for n in range(30):
        made += chain(
            saver,
            f"thread-{n}",
            [
                {"user_id": f"u{n % 4}", "step": s, "run_id": f"r{n}", "big": "x" * 300}
                for s in range(3)
            ],
        )
    return made


def test_indexed_and_scanned_lists_agree(
    server_url: str, prefix: str, round_trips: RoundTrips
) -> None:
    with (
        RedisSaver(server_url, prefix=prefix, index_metadata=INDEXED) as indexed,
        RedisSaver(server_url, prefix=prefix, index_metadata=()) as scanning,
    ):
        made = populate(indexed)
        newest_first = sorted(made, reverse=True)
        filters: list[dict[str, Any]] = [
            {"user_id": "u1"},
            {"user_id": "u1", "step": 2},
            {"step": 0},
            {"run_id": "r7"},
            {"user_id": "nobody"},
            {"user_id": None},  # None matches a missing key: not indexable, scanned
            {"big": "x" * 300},  # not an indexed key: scanned
        ]
        for flt in filters:
            expected = ids(scanning, filter=flt)
            assert ids(indexed, filter=flt) == expected, flt
            assert ids(indexed, filter=flt, limit=3) == expected[:3], flt
            if len(expected) > 4:
                before = cfg("any", checkpoint_id=expected[2])
                assert ids(indexed, filter=flt, before=before, limit=2) == expected[3:5], flt
        u1 = [i for n, i in enumerate(made) if (n // 3) % 4 == 1]
        assert ids(indexed, filter={"user_id": "u1"}) == sorted(u1, reverse=True)
        assert ids(indexed, filter={"user_id": None}) == []
        assert len(newest_first) == 90

        scanning.get_tuple(cfg("thread-0"))  # warm both scripts
        ids(indexed, filter={"user_id": "u2"}, limit=10)
        round_trips.reset()
        found = ids(indexed, filter={"user_id": "u2"}, limit=10)
        assert (round_trips.count, len(found)) == (1, 10)  # one script call, not one per thread


def test_every_operation_keeps_the_index_in_step(
    server_url: str, prefix: str, client: redis.Redis
) -> None:
    keys = KeySchema(prefix)
    user_index = keys.metadata_index(metadata_index_suffix("user_id", '"u1"'))
    with RedisSaver(server_url, prefix=prefix, index_metadata=INDEXED) as saver:
        made = populate(saver)

        def members() -> list[str]:
            return sorted(m.split(b"\0")[0].decode() for m in client.zrange(user_index, 0, -1))

        u1 = sorted(i for n, i in enumerate(made) if (n // 3) % 4 == 1)
        assert members() == u1
        saver.delete_thread("thread-1")  # u1: threads 1, 5, 9, ...
        saver.prune(["thread-5"], strategy="keep_latest")
        saver.delete_for_runs(["r9"])
        saver.copy_thread("thread-13", "copy-of-13")
        gone = set(made[3:6]) | set(made[15:17]) | set(made[27:30])
        expected = sorted([i for i in u1 if i not in gone] + made[39:42])
        assert members() == expected
        assert ids(saver, filter={"user_id": "u1"}) == sorted(expected, reverse=True)
        threads = {
            t.config["configurable"]["thread_id"]
            for t in saver.list(None, filter={"user_id": "u1"})
        }
        assert threads == {"copy-of-13", *(f"thread-{n}" for n in (5, 13, 17, 21, 25, 29))}
        assert saver.check_invariants() == []
        # a lost entry is reported by the checker
        client.zrem(user_index, client.zrange(user_index, 0, 0)[0])
        assert [p.problem for p in saver.check_invariants()] == [
            "checkpoint without its metadata index entry"
        ]


def test_entries_of_vanished_checkpoints_are_dropped_on_the_way(
    server_url: str, prefix: str, client: redis.Redis
) -> None:
    keys = KeySchema(prefix)
    with RedisSaver(server_url, prefix=prefix, index_metadata=INDEXED) as saver:
        made = chain(saver, "t", [{"user_id": "u"} for _ in range(5)])
        tag = keys.tag("t")
        for checkpoint_id in made[1:4]:  # as if they had expired
            client.unlink(keys.checkpoint(tag, "", checkpoint_id))
        assert ids(saver, filter={"user_id": "u"}) == [made[4], made[0]]
        index = keys.metadata_index(metadata_index_suffix("user_id", '"u"'))
        assert client.zcard(index) == 2
    assert not [
        k for k in keys_of(client, f"{prefix}:mi:*") if "user_id" not in k and "source" not in k
    ]


# -- regressions found by review: paging, unbounded growth, a key added later ----------------
@pytest.mark.parametrize("matches", [99, 100, 101, 110, 127, 128, 129, 220])
def test_every_match_is_listed_across_pages(server_url: str, prefix: str, matches: int) -> None:
    """A page that fills in the middle of an inner batch must hand on a cursor."""
    with RedisSaver(server_url, prefix=prefix, index_metadata=INDEXED) as saver:
        made = chain(saver, "t", [{"user_id": "u", "step": i} for i in range(matches)])
        newest_first = made[::-1]
        assert ids(saver, filter={"user_id": "u"}) == newest_first
        for limit in (1, 99, 100, 101, 127, 128, 129):
            assert ids(saver, filter={"user_id": "u"}, limit=limit) == newest_first[:limit]
        middle = {"configurable": {"checkpoint_id": newest_first[matches // 2]}}
        assert (
            ids(saver, filter={"user_id": "u"}, before=middle) == newest_first[matches // 2 + 1 :]
        )


def test_a_live_entry_at_the_front_does_not_stop_the_cleanup(
    server_url: str, prefix: str, client: redis.Redis
) -> None:
    """The oldest member of an index belongs to a pinned thread: the entries of the other
    threads' expired checkpoints must still be dropped, so the index stays in proportion to
    what is alive."""
    keys = KeySchema(prefix)
    index = keys.metadata_index(metadata_index_suffix("source", '"loop"'))
    with RedisSaver(server_url, prefix=prefix, ttl={"default_ttl": 1}) as saver:  # 60 s
        chain(saver, "pinned", [{"source": "loop"}])
        saver.pin_thread("pinned")
        for round_ in range(10):
            chain(saver, f"t{round_}", [{"source": "loop"} for _ in range(100)])
            if round_ < 9:
                advance_time(client, prefix, 70)  # this round's checkpoints expire
        live = 1 + 100
        assert client.zcard(index) <= 2 * live  # before a list, which drops what it meets
        assert len(ids(saver, filter={"source": "loop"})) == live


def test_a_key_added_to_index_metadata_later_finds_older_checkpoints(
    server_url: str, prefix: str, round_trips: RoundTrips
) -> None:
    with RedisSaver(server_url, prefix=prefix) as before:  # user_id not indexed
        old = chain(before, "t", [{"user_id": "alice", "step": i} for i in range(10)])
    with RedisSaver(server_url, prefix=prefix, index_metadata=INDEXED) as after:
        new = chain(after, "u", [{"user_id": "alice", "step": 0}])
        expected = sorted(old + new, reverse=True)
        assert ids(after, filter={"user_id": "alice"}) == expected  # by a scan, meanwhile
        assert after.reindex_metadata() == 20  # user_id and step of the 10 older ones
        round_trips.reset()
        assert ids(after, filter={"user_id": "alice"}) == expected
        assert round_trips.count == 1  # from the index now
        assert after.check_invariants() == []
        # a saver that does not index user_id still keeps the registered index complete
    with RedisSaver(server_url, prefix=prefix) as other:
        newer = chain(other, "v", [{"user_id": "alice", "step": 0}])
    with RedisSaver(server_url, prefix=prefix, index_metadata=INDEXED) as after:
        after.get_tuple(cfg("v"))  # connect first: count only the list
        round_trips.reset()
        assert ids(after, filter={"user_id": "alice"}) == newer + expected
        assert round_trips.count == 2  # the registry check, then the index


def test_a_registry_lost_during_a_reindex_is_not_marked_ready(
    server_url: str, prefix: str, client: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The registry deleted while a reindex runs: the threads it visits next are indexed
    under no key, and a put registers its saver's key as building again; the reindex must
    not mark that key ready at its end (it did, when it marked whatever was "building" then,
    and a filter missed a thread). It marks only what it claimed at its start."""
    with RedisSaver(server_url, prefix=prefix) as plain:  # (indexes no key)
        for thread in ("t1", "t2", "t3"):
            chain(plain, thread, [{"user_id": "ana", "step": 0}])
    writer = RedisSaver(server_url, prefix=prefix, index_metadata=("user_id",))
    reindexer = RedisSaver(server_url, prefix=prefix, index_metadata=("user_id",))
    try:
        chain(writer, "w0", [{"user_id": "bob", "step": 0}])  # registers user_id: building
        send, visited = reindexer._send, []

        def lose_the_registry(request: Any) -> Any:
            reply = send(request)
            if getattr(request, "name", None) == "reindex_thread":
                visited.append(1)
                if len(visited) == 1:
                    client.delete(f"{prefix}:mk")  # (evicted, deleted, ...)
                elif len(visited) == 2:
                    chain(writer, "w1", [{"user_id": "bob", "step": 0}])  # registers it again
            return reply

        monkeypatch.setattr(reindexer, "_send", lose_the_registry)
        reindexer.reindex_metadata()
        assert len(visited) in (4, 5)  # (t1-t3, w0; w1 if the SCAN meets it)
        assert client.hget(f"{prefix}:mk", "user_id") == b"building"
        found = {t.config["configurable"]["thread_id"]
                 for t in reindexer.list(None, filter={"user_id": "ana"})}  # fmt: skip
        assert found == {"t1", "t2", "t3"}
        monkeypatch.undo()
        reindexer.reindex_metadata()  # (a reindex of its own completes it)
        assert client.hget(f"{prefix}:mk", "user_id") == b"ready"
        found = {t.config["configurable"]["thread_id"]
                 for t in reindexer.list(None, filter={"user_id": "ana"})}  # fmt: skip
        assert found == {"t1", "t2", "t3"}
    finally:
        writer.close()
        reindexer.close()


def test_pending_writes_before_the_first_checkpoint_do_not_mark_the_index_incomplete(
    server_url: str, prefix: str, round_trips: RoundTrips
) -> None:
    """LangGraph may store a task's writes before the first checkpoint's put lands: a thread
    with writes only has nothing to index, so the registry says "ready" (before, the index
    stayed unused, and dead entries unswept, until a reindex)."""
    with RedisSaver(server_url, prefix=prefix, index_metadata=INDEXED) as saver:
        saver.put_writes(cfg("t", checkpoint_id="x"), [("n", 1)], "task")
        [made] = chain(saver, "t", [{"user_id": "u"}])
        round_trips.reset()
        assert ids(saver, filter={"user_id": "u"}) == [made]
        assert round_trips.count == 1  # straight from the index


def run_script_calls(saver: RedisSaver, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The threads whose delete_for_runs script the saver calls."""
    from langgraph.checkpoint.rediskv.core import Batch, ScriptCall

    threads: list[str] = []
    send = saver._send

    def counted(request: Any) -> Any:
        calls = request.calls if isinstance(request, Batch) else [request]
        threads.extend(
            c.args[1] for c in calls if isinstance(c, ScriptCall) and c.name == "delete_for_runs"
        )
        return send(request)

    monkeypatch.setattr(saver, "_send", counted)
    return threads


def test_delete_for_runs_visits_only_the_threads_in_run_id_s_index(
    server_url: str, prefix: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before, delete_for_runs visited every thread of the store (540 ms at 10,000 threads,
    benchmarks/global_queries.py); run_id's index, kept by default, names the runs' threads."""
    with RedisSaver(server_url, prefix=prefix) as saver:
        made = populate(saver)
        extra = chain(saver, "thread-3", [{"run_id": "r7", "step": 9}])
        visited = run_script_calls(saver, monkeypatch)
        saver.delete_for_runs(["r7", "r11", "no such run"])
        assert sorted(visited) == ["{thread-11}", "{thread-3}", "{thread-7}"]
        gone = set(made[7 * 3 : 8 * 3] + made[11 * 3 : 12 * 3] + extra)
        assert ids(saver) == sorted(set(made) - gone, reverse=True)


def test_delete_for_runs_without_a_complete_run_index_visits_every_thread(
    server_url: str, prefix: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    with RedisSaver(server_url, prefix=prefix, index_metadata=[]) as saver:
        made = populate(saver)  # run_id is in no index: every thread is visited
        visited = run_script_calls(saver, monkeypatch)
        saver.delete_for_runs(["r7"])
        assert len(visited) == 30
        assert ids(saver) == sorted(set(made) - set(made[21:24]), reverse=True)
    with RedisSaver(server_url, prefix=prefix) as saver:  # run_id registered, "building"
        visited = run_script_calls(saver, monkeypatch)
        saver.delete_for_runs(["r8"])
        assert len(visited) == 29  # (r7 took thread-7 whole)
        saver.reindex_metadata()
        visited.clear()
        saver.delete_for_runs(["r9"])
        assert visited == ["{thread-9}"]
        gone = set(made[21:30])
        assert ids(saver) == sorted(set(made) - gone, reverse=True)


def test_delete_for_runs_finds_runs_the_index_does_not_hold_by_their_text(
    server_url: str, prefix: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """delete_for_runs deletes by the text of the metadata's run_id (the record's r), while
    run_id's index holds the canonical value: an int 5 under `5`, not `"5"`, and no string
    over 254 characters. Before the fix such threads were left with their checkpoints (the
    hostile review's defect 3); they are in P:rx now, and visited too."""
    long_run = "r" * 300
    with RedisSaver(server_url, prefix=prefix) as saver:
        chain(saver, "t-int", [{"run_id": 5, "step": 0}])
        chain(saver, "t-long", [{"run_id": long_run, "step": 0}])
        kept = chain(saver, "t-str", [{"run_id": "6", "step": 0}])
        saver.copy_thread("t-int", "t-int-copy")
        visited = run_script_calls(saver, monkeypatch)
        saver.delete_for_runs(["5", long_run])
        assert sorted(visited) == ["{t-int-copy}", "{t-int}", "{t-long}"]
        for thread in ("t-int", "t-long", "t-int-copy"):
            assert list(saver.list(cfg(thread))) == []
        assert [t.checkpoint["id"] for t in saver.list(cfg("t-str"))] == kept
        assert saver.check_invariants() == []
