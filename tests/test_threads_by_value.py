"""Threads-by-value indexes (P:tm, standalone servers): list(None, filter) on a metadata key
that no saver declared in index_metadata visits only the threads listed under the filter's
values, with the same answers as a scan of every thread. Short string values of any key
are listed (core.thread_indexed); numbers and LangGraph's source and step are not.
"""

from __future__ import annotations

from typing import Any

import pytest
import redis

from langgraph.checkpoint.rediskv import RedisSaver
from langgraph.checkpoint.rediskv.core import SaverCore
from langgraph.checkpoint.rediskv.keys import THREADS_BY_VALUE, KeySchema

from .clock import advance_time
from .conftest import data_keys, keys_of, record_of, set_record_field
from .test_contract import cfg, chain

THREADS = 24


def metadata_of(n: int, step: int) -> dict[str, Any]:
    return {"user_id": f"u{n % 4}", "tenant": f"t{n % 3}", "step": step, "run_id": f"r{n}"}


def populate(saver: RedisSaver) -> dict[str, list[tuple[str, dict[str, Any]]]]:
    """THREADS threads of 3 checkpoints each; their (id, metadata) by thread."""
    made: dict[str, list[tuple[str, dict[str, Any]]]] = {}
    for n in range(THREADS):
        mds = [metadata_of(n, s) for s in range(3)]
        made[f"thread-{n}"] = list(zip(chain(saver, f"thread-{n}", mds), mds, strict=True))
    return made


def expected(made: dict[str, list[tuple[str, dict[str, Any]]]], **flt: Any) -> list[str]:
    """Brute force: every checkpoint whose metadata has the filter's values, newest first."""
    found = [
        cid
        for rows in made.values()
        for cid, md in rows
        if all(md.get(k) == v for k, v in flt.items())
    ]
    return sorted(found, reverse=True)


def threads_of(made: dict[str, list[tuple[str, dict[str, Any]]]], **flt: Any) -> list[str]:
    return sorted(
        t
        for t, rows in made.items()
        if any(all(md.get(k) == v for k, v in flt.items()) for _, md in rows)
    )


@pytest.fixture
def visited(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The threads that per-thread list calls visit."""
    seen: list[str] = []
    original = SaverCore._list_call

    def counted(self: SaverCore, thread_id: str, *args: Any, **kw: Any) -> Any:
        seen.append(thread_id)
        return original(self, thread_id, *args, **kw)

    monkeypatch.setattr(SaverCore, "_list_call", counted)
    return seen


def listed(saver: RedisSaver, visited: list[str], **flt: Any) -> tuple[list[str], list[str]]:
    visited.clear()
    got = [t.checkpoint["id"] for t in saver.list(None, filter=flt)]
    return got, sorted(set(visited))


def test_a_filter_on_any_key_visits_only_the_threads_listed_under_its_value(
    saver: RedisSaver, visited: list[str]
) -> None:
    made = populate(saver)
    for user in ("u0", "u1", "u2", "u3"):
        got, threads = listed(saver, visited, user_id=user)
        assert got == expected(made, user_id=user) and len(got) == 18
        assert threads == threads_of(made, user_id=user) and len(threads) == 6
    # two values: the threads listed under both
    got, threads = listed(saver, visited, user_id="u1", tenant="t2")
    assert got == expected(made, user_id="u1", tenant="t2") and len(got) == 6
    assert threads == threads_of(made, user_id="u1", tenant="t2") == ["thread-17", "thread-5"]
    # a value no thread has: nothing visited
    assert listed(saver, visited, user_id="nobody") == ([], [])
    # numbers are not listed (most are counters): every thread is visited
    got, threads = listed(saver, visited, step=1)
    assert got == expected(made, step=1) and len(threads) == THREADS
    # with a limit and before, as a scan would answer
    flt = {"tenant": "t0"}
    everything = expected(made, **flt)
    page = [t.checkpoint["id"] for t in saver.list(None, filter=flt, limit=5)]
    assert page == everything[:5]
    rest = saver.list(None, filter=flt, before=cfg("thread-0", checkpoint_id=everything[4]))
    assert [t.checkpoint["id"] for t in rest] == everything[5:]


def test_deleted_and_pruned_threads_are_never_listed(
    saver: RedisSaver, visited: list[str], client: redis.Redis, prefix: str
) -> None:
    made = populate(saver)
    saver.delete_thread("thread-1")  # u1
    saver.prune(["thread-5"], strategy="keep_latest")  # u1: its two older checkpoints go
    saver.delete_for_runs(["r9"])  # thread-9, u1: all of it
    got, threads = listed(saver, visited, user_id="u1")
    kept = {cid for t in ("thread-13", "thread-17", "thread-21") for cid, _ in made[t]}
    assert got == sorted(kept | {made["thread-5"][-1][0]}, reverse=True)
    # the deleted threads may still be listed under the value (swept as new threads are
    # added), which costs a call each, never a wrong answer
    assert set(threads) >= {"thread-13", "thread-17", "thread-21", "thread-5"}
    index = KeySchema(prefix).threads_with('user_id:%22u1%22')
    assert client.smembers(index) >= {KeySchema.tag(t).encode() for t in ("thread-13", "thread-5")}


def test_a_copy_is_listed_under_its_values(saver: RedisSaver, visited: list[str]) -> None:
    made = populate(saver)
    saver.copy_thread("thread-2", "copy-of-2")
    got, threads = listed(saver, visited, user_id="u2")
    assert threads == sorted([*threads_of(made, user_id="u2"), "copy-of-2"])
    assert len(got) == len(expected(made, user_id="u2")) + 3


def test_a_store_written_before_the_indexes_is_scanned_until_a_reindex(
    server_url: str, prefix: str, client: redis.Redis, visited: list[str]
) -> None:
    with RedisSaver(server_url, prefix=prefix) as writer:
        made = populate(writer)
    # as an earlier version left the store: no threads-by-value index, no "/" entries in ix,
    # nothing in the registry about them
    keys = KeySchema(prefix)
    for key in keys_of(client, f"{prefix}:tm:*"):
        client.delete(key)
    client.hdel(keys.metadata_keys(), THREADS_BY_VALUE)
    for key in keys_of(client, f"{prefix}:cp:*"):
        ix = record_of(client, key)["ix"].split(b",")
        set_record_field(client, key, "ix", b",".join(e for e in ix if not e.startswith(b"/")))
    with RedisSaver(server_url, prefix=prefix) as saver:
        got, threads = listed(saver, visited, user_id="u3")
        assert got == expected(made, user_id="u3") and len(threads) == THREADS  # a scan
        assert client.hget(keys.metadata_keys(), THREADS_BY_VALUE) == b"building"
        # a put meanwhile is indexed, and not mistaken for a complete index
        chain(saver, "late", [{"user_id": "u3", "step": 0}])
        got, threads = listed(saver, visited, user_id="u3")
        assert len(got) == 19 and len(threads) == THREADS + 1
        assert saver.reindex_metadata() == THREADS * 3 * 2  # (user_id and tenant of each)
        assert client.hget(keys.metadata_keys(), THREADS_BY_VALUE) == b"ready"
        got, threads = listed(saver, visited, user_id="u3")
        assert len(got) == 19 and threads == sorted([*threads_of(made, user_id="u3"), "late"])
        assert saver.check_invariants() == []


def test_the_indexes_expire_with_their_threads(
    server_url: str, prefix: str, client: redis.Redis
) -> None:
    with RedisSaver(server_url, prefix=prefix, ttl={"default_ttl": 1}) as saver:
        populate(saver)
        (index,) = keys_of(client, f"{prefix}:tm:user_id:%22u0%22")
        assert 0 < client.ttl(index) <= 60
        advance_time(client, prefix, 61)
        assert [k for k in data_keys(client, prefix) if k != f"{prefix}:mk"] == []


def test_numbers_and_long_values_and_langgraph_keys_are_not_listed(
    saver: RedisSaver, client: redis.Redis, prefix: str
) -> None:
    chain(
        saver,
        "t",
        [{"source": "loop", "step": 1, "run_id": "r", "n": 5, "long": "x" * 129, "ok": "y" * 128}],
    )
    assert sorted(keys_of(client, f"{prefix}:tm:*")) == [f"{prefix}:tm:ok:%22{'y' * 128}%22"]


def test_a_thread_given_its_own_expiry_takes_the_indexes_only_it_is_in_along(
    saver: RedisSaver, client: redis.Redis, prefix: str
) -> None:
    chain(saver, "t", [{"user_id": "only-t", "step": 0}])
    chain(saver, "other", [{"user_id": "shared", "step": 0}])
    chain(saver, "t", [{"user_id": "shared", "step": 1}])
    keys = KeySchema(prefix)
    own = keys.threads_with("user_id:%22only-t%22")
    shared = keys.threads_with("user_id:%22shared%22")
    saver.set_thread_ttl("t", 120)  # minutes
    root_ttl = client.ttl(keys.thread(KeySchema.tag("t")))
    assert root_ttl > 0 and abs(client.ttl(own) - root_ttl) <= 1  # only t is listed: it follows
    assert client.ttl(shared) == -1  # "other" is listed too, and never expires
    saver.pin_thread("t")
    assert (client.ttl(own), client.ttl(shared)) == (-1, -1)
    assert saver.check_invariants() == []
