"""TTL expiry on a real server with short TTLs: whole threads expire after inactivity, never in
pieces, active threads stay complete, and a thread can be pinned or given its own TTL."""

from __future__ import annotations

import operator
import time
import uuid
from datetime import timedelta
from typing import Annotated, Any

import pytest
import redis
from langgraph.graph import END, START, StateGraph
from typing_extensions import TypedDict

from langgraph.checkpoint.rediskv import AsyncRedisSaver, CheckpointLostError, RedisSaver
from langgraph.checkpoint.rediskv.keys import KeySchema

from ..clock import advance_time, expire_record
from ..conftest import RoundTrips, data_keys, due_threads, keys_of
from .test_contract import cfg, chain, make_checkpoint


class ChatState(TypedDict, total=False):
    profile: str  # written once, on the first turn, and never again
    messages: Annotated[list[str], operator.add]


def build_chat(saver: Any) -> Any:
    def remember(state: ChatState) -> ChatState:
        return {} if state.get("profile") else {"profile": "likes tea"}

    def reply(state: ChatState) -> ChatState:
        return {"messages": [f"bot {len(state['messages'])}"]}

    builder = StateGraph(ChatState)
    builder.add_node("remember", remember)
    builder.add_node("reply", reply)
    builder.add_edge(START, "remember")
    builder.add_edge(START, "reply")  # two tasks in one superstep: pending writes get stored
    builder.add_edge("remember", END)
    builder.add_edge("reply", END)
    return builder.compile(checkpointer=saver)


def turn(graph: Any, thread_id: str, text: str) -> dict[str, Any]:
    config = {"configurable": {"thread_id": thread_id, "run_id": str(uuid.uuid4())}}
    return graph.invoke({"messages": [text]}, config)  # type: ignore[no-any-return]


def expected_messages(turns: int) -> list[str]:
    out: list[str] = []
    for i in range(turns):
        out += [f"user {i}", f"bot {2 * i + 1}"]
    return out


def test_every_key_written_carries_an_expiry(
    server_url: str, prefix: str, client: redis.Redis
) -> None:
    with RedisSaver(server_url, prefix=prefix, ttl={"default_ttl": 0.5}) as saver:  # 30 s
        graph = build_chat(saver)
        for i in range(3):
            turn(graph, "t", f"user {i}")
        # writes before their checkpoint (async durability may store them first): own hash
        saver.put_writes(cfg("t", checkpoint_id="not stored yet"), [("x", 1)], "task")
        saver.copy_thread("t", "copy")
        ttls = {k: client.ttl(k) for k in data_keys(client, prefix)}
    kinds = {k.split(":")[1] for k in ttls}
    assert kinds == {"th", "idx", "dl", "cp", "w", "wi", "blob", "runs", "run", "mi", "tm", "tv"}
    assert all(0 < ttl <= 30 for ttl in ttls.values()), ttls


def test_an_idle_thread_leaves_nothing_behind(
    server_url: str, prefix: str, client: redis.Redis
) -> None:
    with RedisSaver(server_url, prefix=prefix, ttl={"default_ttl": timedelta(seconds=1)}) as saver:
        graph = build_chat(saver)
        for i in range(3):
            turn(graph, "idle", f"user {i}")
        assert keys_of(client, KeySchema(prefix).thread_keys_pattern("idle")) != []
        time.sleep(2.2)
        assert data_keys(client, prefix) == []
        assert due_threads(client, prefix) == []  # (its deadline passed with its keys)
        assert saver.get_tuple(cfg("idle")) is None
        assert list(saver.list(None)) == []


def test_an_active_thread_keeps_values_that_never_change(server_url: str, prefix: str) -> None:
    ttl = {"default_ttl": timedelta(seconds=2)}
    with RedisSaver(server_url, prefix=prefix, ttl=ttl) as saver:
        graph = build_chat(saver)
        started = time.monotonic()
        turns = 0
        while time.monotonic() - started < 5.0:  # 2.5 TTLs, a turn every 0.6 s
            turn(graph, "active", f"user {turns}")
            turns += 1
            time.sleep(0.6)
    with RedisSaver(server_url, prefix=prefix, ttl=ttl) as fresh:  # a brand-new instance
        state = build_chat(fresh).get_state({"configurable": {"thread_id": "active"}})
    assert state.values == {"profile": "likes tea", "messages": expected_messages(turns)}


def test_refresh_on_read_keeps_a_read_thread_whole(server_url: str, prefix: str) -> None:
    ttl = {"default_ttl": timedelta(seconds=2), "refresh_on_read": True}
    with (
        RedisSaver(server_url, prefix=prefix, ttl=ttl) as reader,
        RedisSaver(
            server_url, prefix=prefix, ttl={"default_ttl": timedelta(seconds=2)}
        ) as no_refresh,
    ):
        graph = build_chat(reader)
        turn(graph, "read", "user 0")
        turn(graph, "unread", "user 0")
        started = time.monotonic()
        while time.monotonic() - started < 5.0:
            tup = reader.get_tuple(cfg("read"))
            assert tup is not None
            assert (
                no_refresh.get_tuple(cfg("unread")) is not None or time.monotonic() - started > 1.5
            )
            time.sleep(0.6)
        assert no_refresh.get_tuple(cfg("unread")) is None
        assert graph.get_state({"configurable": {"thread_id": "read"}}).values == {
            "profile": "likes tea",
            "messages": expected_messages(1),
        }


def test_a_checkpoint_is_complete_or_absent(saver: RedisSaver, client: redis.Redis) -> None:
    keys = KeySchema(saver.prefix)
    tag = keys.tag("t")
    ids = chain(saver, "t", [{"step": i} for i in range(4)])
    # a blob of the latest checkpoint goes missing: it expires with its record or after it,
    # so only an eviction takes it first, and a read says so instead of skipping it
    latest = saver.get_tuple(cfg("t"))
    assert latest is not None
    blob = keys.blob(tag, "", "n", latest.checkpoint["channel_versions"]["n"])
    client.unlink(blob)
    with pytest.raises(CheckpointLostError) as lost:
        saver.get_tuple(cfg("t"))
    assert (lost.value.thread_id, lost.value.what, lost.value.key) == ("t", "value", blob)
    with pytest.raises(CheckpointLostError):
        list(saver.list(cfg("t")))
    client.zrem(keys.index(tag, ""), ids[3])
    assert [t.checkpoint["id"] for t in saver.list(cfg("t"))] == [ids[2], ids[1], ids[0]]
    # an index entry whose checkpoint expired is skipped, then cleaned up (with its ledger
    # entry); one whose record was evicted (its ledger says it should be there) is an error
    client.unlink(keys.checkpoint(tag, "", ids[2]))
    with pytest.raises(CheckpointLostError) as lost:
        list(saver.list(cfg("t")))
    assert (lost.value.what, lost.value.key) == (
        "checkpoint record",
        keys.checkpoint(tag, "", ids[2]),
    )
    client.hset(keys.ledger(tag, ""), ids[2], "1 -")  # (as if it had expired)
    assert [t.checkpoint["id"] for t in saver.list(cfg("t"))] == [ids[1], ids[0]]
    assert client.zrange(keys.index(tag, ""), 0, -1) == [i.encode() for i in [ids[0], ids[1]]]
    # (ids[3] left the index by hand above, not by a script: its ledger entry stays)
    assert sorted(client.hkeys(keys.ledger(tag, ""))) == [
        i.encode() for i in (ids[0], ids[1], ids[3])
    ]
    expire_record(client, keys, tag, "", ids[1])
    assert [t.checkpoint["id"] for t in saver.list(cfg("t"))] == [ids[0]]
    assert client.zrange(keys.index(tag, ""), 0, -1) == [ids[0].encode()]
    assert sorted(client.hkeys(keys.ledger(tag, ""))) == [i.encode() for i in (ids[0], ids[3])]


def test_indexes_of_a_long_lived_thread_stay_bounded(
    server_url: str, prefix: str, client: redis.Redis
) -> None:
    keys = KeySchema(prefix)
    tag = keys.tag("t")
    with RedisSaver(server_url, prefix=prefix, ttl={"default_ttl": timedelta(seconds=1)}) as saver:
        old = chain(saver, "t", [{"step": i} for i in range(6)])
        time.sleep(1.5)  # the whole history expires; now the thread becomes active again
        new = chain(saver, "t", [{"step": i} for i in range(4)])
        live = client.zrange(keys.index(tag, ""), 0, -1)
    assert not set(old) & {i.decode() for i in live}
    assert [i.decode() for i in live] == new


def test_pinned_thread_survives_and_unpinned_expires_again(
    server_url: str, prefix: str, client: redis.Redis
) -> None:
    keys = KeySchema(prefix)
    with RedisSaver(server_url, prefix=prefix, ttl={"default_ttl": timedelta(seconds=1)}) as saver:
        graph = build_chat(saver)
        turn(graph, "pinned", "user 0")
        turn(graph, "other", "user 0")
        saver.pin_thread("pinned")
        turn(graph, "pinned", "user 1")  # writes to a pinned thread are not given an expiry
        pinned_keys = keys_of(client, keys.thread_keys_pattern("pinned"))
        assert {client.ttl(k) for k in pinned_keys} == {-1}
        time.sleep(1.6)
        assert keys_of(client, keys.thread_keys_pattern("other")) == []
        assert keys_of(client, keys.thread_keys_pattern("pinned")) == pinned_keys
        assert graph.get_state({"configurable": {"thread_id": "pinned"}}).values == {
            "profile": "likes tea",
            "messages": expected_messages(2),
        }
        saver.unpin_thread("pinned")
        setting = keys.thread_ttl(keys.tag("pinned"))
        assert setting in pinned_keys and client.exists(setting) == 0
        assert all(0 < client.ttl(k) <= 1 for k in pinned_keys if k != setting)
        time.sleep(1.6)
        assert data_keys(client, prefix) == []


async def test_a_thread_with_its_own_ttl(server_url: str, prefix: str, client: redis.Redis) -> None:
    keys = KeySchema(prefix)
    async with AsyncRedisSaver(server_url, prefix=prefix) as saver:  # no default expiry
        graph = build_chat(saver)
        for thread_id in ["short", "forever"]:
            await graph.ainvoke(
                {"messages": ["user 0"]}, {"configurable": {"thread_id": thread_id}}
            )
        await saver.aset_thread_ttl("short", timedelta(seconds=1))
        await graph.ainvoke({"messages": ["user 1"]}, {"configurable": {"thread_id": "short"}})
        short_keys = keys_of(client, keys.thread_keys_pattern("short"))
        assert all(0 < client.ttl(k) <= 1 for k in short_keys)
        time.sleep(1.6)
        assert keys_of(client, keys.thread_keys_pattern("short")) == []
        assert {client.ttl(k) for k in keys_of(client, keys.thread_keys_pattern("forever"))} == {-1}
        state = await graph.aget_state({"configurable": {"thread_id": "forever"}})
        assert state.values == {"profile": "likes tea", "messages": expected_messages(1)}


def test_ttl_costs_no_extra_round_trip(
    server_url: str, prefix: str, round_trips: RoundTrips
) -> None:
    ttl = {"default_ttl": 5, "refresh_on_read": True}
    with RedisSaver(server_url, prefix=prefix, ttl=ttl) as saver:
        ids = chain(saver, "t", [{"step": i} for i in range(20)])
        saver.get_tuple(cfg("t"))
        round_trips.reset()
        chain_more = chain(saver, "t2", [{"step": 0}])
        first_put = round_trips.count
        round_trips.reset()
        version = saver.get_next_version(None, None)
        checkpoint = make_checkpoint({"n": 1}, {"n": version})
        saver.put(cfg("t2", checkpoint_id=chain_more[0]), checkpoint, {"step": 1}, {"n": version})
        put_count = round_trips.count
        round_trips.reset()
        tup = saver.get_tuple(cfg("t"))
        # a thread's first put notes it in the registry of live threads (one round trip more,
        # core/deadlines.py), its next ones until its deadline grew by 1/16 of the ttl not
        assert (first_put, put_count, round_trips.count) == (2, 1, 1)
        assert tup is not None and tup.checkpoint["id"] == ids[-1] and len(chain_more) == 1


# -- regressions found by review: a ttl changed later, long supersteps, refresh_on_read ------
def test_a_saver_without_ttl_keeps_a_thread_first_written_with_one(
    server_url: str, prefix: str, client: redis.Redis
) -> None:
    """Written with a ttl, then by a saver with ttl=None: the new checkpoints depend on blobs
    and indexes that were written to expire. They must stop expiring."""
    with RedisSaver(server_url, prefix=prefix, ttl={"default_ttl": 1}) as with_ttl:  # 60 s
        graph = build_chat(with_ttl)
        for i in range(2):
            turn(graph, "t", f"user {i}")
    with RedisSaver(server_url, prefix=prefix) as without_ttl:
        graph = build_chat(without_ttl)
        turn(graph, "t", "user 2")
        advance_time(client, prefix, 120)  # everything written with the ttl is gone now
        assert graph.get_state({"configurable": {"thread_id": "t"}}).values == {
            "profile": "likes tea",
            "messages": expected_messages(3),
        }
        assert len(list(without_ttl.list(cfg("t")))) == 3  # the turn written without a ttl
        without_ttl.delete_thread("t")
        # only entries of checkpoints that expired earlier are left, in the shared metadata
        # indexes (a delete cannot find them); a list that meets them drops them
        assert {k.split(":")[1] for k in data_keys(client, prefix)} <= {"mi"}
        for source in ("input", "loop"):
            assert list(without_ttl.list(None, filter={"source": source})) == []
        for step in (-1, 0, 1):
            assert list(without_ttl.list(None, filter={"step": step})) == []
    assert data_keys(client, prefix) == []


def test_refresh_on_read_keeps_the_run_and_metadata_indexes(
    server_url: str, prefix: str, client: redis.Redis
) -> None:
    """A thread kept alive by reads alone stays findable by run and deletable by run."""
    ttl = {"default_ttl": 1, "refresh_on_read": True}  # 60 s
    with RedisSaver(server_url, prefix=prefix, ttl=ttl) as saver:
        ids = chain(saver, "t", [{"run_id": "r1", "source": "loop", "step": i} for i in range(3)])
        for _ in range(4):  # 160 s in all, read every 40 s
            advance_time(client, prefix, 40)
            tup = saver.get_tuple(cfg("t"))
            assert tup is not None and tup.checkpoint["id"] == ids[-1]
        found = [t.checkpoint["id"] for t in saver.list(None, filter={"run_id": "r1"})]
        assert found == [ids[-1]]
        saver.delete_for_runs(["r1"])
        assert saver.get_tuple(cfg("t")) is None


def test_a_superstep_longer_than_the_ttl_keeps_the_state(
    server_url: str, prefix: str, client: redis.Redis
) -> None:
    """One node runs longer than the ttl: the values the next checkpoint shares with the one
    the step started from (written long before) must not have expired by the time it is
    stored."""
    ttl = {"default_ttl": 1}  # 60 s

    def slow_reply(state: ChatState) -> ChatState:
        if len(state["messages"]) > 1:
            advance_time(client, prefix, 70)  # this node takes 70 s
        return {"messages": [f"bot {len(state['messages'])}"]}

    builder = StateGraph(ChatState)
    builder.add_node("remember", lambda s: {} if s.get("profile") else {"profile": "likes tea"})
    builder.add_node("reply", slow_reply)
    builder.add_edge(START, "remember")
    builder.add_edge("remember", "reply")
    builder.add_edge("reply", END)
    with RedisSaver(server_url, prefix=prefix, ttl=ttl) as saver:
        graph = builder.compile(checkpointer=saver)
        config = {"configurable": {"thread_id": "slow"}}
        graph.invoke({"messages": ["user 0"]}, config)
        result = graph.invoke({"messages": ["user 1"]}, config)
        assert result == {
            "profile": "likes tea",
            "messages": ["user 0", "bot 1", "user 1", "bot 3"],
        }
        assert graph.get_state(config).values == result
        assert saver.check_invariants() == []


def test_entries_of_expired_keys_are_reported_as_stale(
    server_url: str, prefix: str, client: redis.Redis
) -> None:
    """Expiry leaves entries that point at keys which are gone: the checker says they are
    stale (harmless, swept as readers meet them), not broken."""
    with RedisSaver(server_url, prefix=prefix, ttl={"default_ttl": 1}) as with_ttl:
        turn(build_chat(with_ttl), "t", "user 0")
        # writes that arrive before their checkpoint (LangGraph's async durability may do
        # that) have a hash and a writes index entry of their own
        with_ttl.put_writes(cfg("t", checkpoint_id="not stored yet"), [("x", 1)], "task")
    with RedisSaver(server_url, prefix=prefix) as without_ttl:
        turn(build_chat(without_ttl), "t", "user 1")
        # the same without a ttl, and then the checkpoint: the writes index stops expiring
        checkpoint = make_checkpoint({}, {})
        without_ttl.put_writes(cfg("t", checkpoint_id=checkpoint["id"]), [("x", 1)], "task")
        without_ttl.put(cfg("t"), checkpoint, {}, {})
        advance_time(client, prefix, 120)
        problems = without_ttl.check_invariants()
        assert problems and all(p.stale for p in problems)
        assert {p.problem for p in problems} == {
            "index entry without checkpoint",
            "run without run index",
            "writes index entry without writes",
        }


def test_the_latest_checkpoint_is_the_newest_still_there(
    server_url: str, prefix: str, client: redis.Redis
) -> None:
    """Checkpoints written with a ttl after one written without expire: get_tuple and prune
    (keep_latest) see through their index entries to the checkpoint that is still there,
    instead of answering None and pruning it away."""
    with (
        RedisSaver(server_url, prefix=prefix) as without_ttl,
        RedisSaver(server_url, prefix=prefix, ttl={"default_ttl": 1}) as with_ttl,
    ):
        [kept] = chain(without_ttl, "t", [{"step": 0}])
        chain(with_ttl, "t", [{"step": i} for i in range(1, 4)])
        advance_time(client, prefix, 120)
        for saver in (with_ttl, without_ttl):
            tup = saver.get_tuple(cfg("t"))
            assert tup is not None and tup.checkpoint["id"] == kept
        with_ttl.prune(["t"], strategy="keep_latest")
        assert [t.checkpoint["id"] for t in with_ttl.list(cfg("t"))] == [kept]


def test_blobs_that_outlive_their_checkpoints_are_still_found(
    server_url: str, prefix: str, client: redis.Redis
) -> None:
    """Found by the model test: a checkpoint written without a ttl is put again with one;
    its blobs, which never expire, outlived the record that referenced them, and nothing led
    to them any more (the checker saw orphans, and a delete could not find them)."""
    keys = KeySchema(prefix)
    with (
        RedisSaver(server_url, prefix=prefix) as without_ttl,
        RedisSaver(server_url, prefix=prefix, ttl={"default_ttl": 1}) as with_ttl,
    ):
        v1, v2 = without_ttl.get_next_version(None, None), without_ttl.get_next_version(None, None)
        first = make_checkpoint({"n": "first", "profile": "tea"}, {"n": v1, "profile": v1})
        without_ttl.put(cfg("t"), first, {}, {"n": v1, "profile": v1})
        again = make_checkpoint({"n": "again", "profile": "tea"}, {"n": v2, "profile": v1})
        again["id"] = first["id"]
        with_ttl.put(cfg("t"), again, {}, {"n": v2})
        advance_time(client, prefix, 120)
        assert [p for p in with_ttl.check_invariants() if not p.stale] == []
        with_ttl.delete_thread("t")
        assert keys_of(client, keys.thread_keys_pattern("t")) == []


def test_a_namespace_emptied_by_expiry_leaves_nothing_behind(
    server_url: str, prefix: str, client: redis.Redis
) -> None:
    """Found by the model test: once the only checkpoint of a namespace expired, a list
    forgot the namespace but left its loose blobs unreachable; and a thread whose root went
    that way kept its run index through a delete."""
    keys = KeySchema(prefix)
    with (
        RedisSaver(server_url, prefix=prefix) as without_ttl,
        RedisSaver(server_url, prefix=prefix, ttl={"default_ttl": 1}) as with_ttl,
    ):
        for thread in ("listed", "deleted"):
            v1, v2 = without_ttl.get_next_version(None, None), with_ttl.get_next_version(None, None)
            first = make_checkpoint({"n": "first"}, {"n": v1})
            without_ttl.put(cfg(thread), first, {"run_id": "r"}, {"n": v1})
            again = {**make_checkpoint({"n": "again"}, {"n": v2}), "id": first["id"]}
            with_ttl.put(cfg(thread), again, {"run_id": "r"}, {"n": v2})  # type: ignore[arg-type]
        advance_time(client, prefix, 120)
        assert list(with_ttl.list(cfg("listed"))) == []
        assert list(with_ttl.list({"configurable": {"thread_id": "listed"}})) == []
        assert [p for p in with_ttl.check_invariants() if not p.stale] == []
        with_ttl.prune(["deleted"], strategy="keep_latest")
        with_ttl.delete_thread("deleted")
        assert keys_of(client, keys.thread_keys_pattern("deleted")) == []


def test_blobs_a_checkpoint_shares_past_its_own_expiry_stay_reachable(
    server_url: str, prefix: str, client: redis.Redis
) -> None:
    # Found by the model: a checkpoint put again under a shorter ttl expired before the blob
    # it shares (expiries only grow), which was then reachable from nothing (the checker saw
    # an orphan, and a delete could not have found it). It is a loose blob now.
    values = {"messages": ["hello"], "counter": 1}
    checkpoint = make_checkpoint(values, {"messages": "1", "counter": "1"})
    with RedisSaver(server_url, prefix=prefix, ttl={"default_ttl": 1}) as saver:
        saver.put(cfg("t"), checkpoint, {}, {"messages": "1", "counter": "1"})
    again = make_checkpoint(values | {"counter": 2}, {"messages": "1", "counter": "2"})
    again["id"] = checkpoint["id"]
    with RedisSaver(server_url, prefix=prefix, ttl={"default_ttl": 0.5}) as saver:
        saver.put(cfg("t"), again, {}, {"counter": "2"})
        advance_time(client, prefix, 35)
        assert saver.get_tuple(cfg("t")) is None  # the record took the shorter ttl
        assert [p for p in saver.check_invariants() if not p.stale] == []
        advance_time(client, prefix, 30)
        assert data_keys(client, prefix) == []


def test_a_blob_sent_again_under_a_ttl_keeps_its_longer_life(
    server_url: str, prefix: str, client: redis.Redis
) -> None:
    # Found by review: a record put again under a ttl, with the same version of a value that a
    # checkpoint without a ttl shares, gave the blob the short expiry (SET + EXPIRE).
    with RedisSaver(server_url, prefix=prefix) as plain:
        c1 = make_checkpoint({"x": "value"}, {"x": "1"})
        plain.put(cfg("t"), c1, {}, {"x": "1"})
        c2 = make_checkpoint({"x": "value", "y": 1}, {"x": "1", "y": "1"})
        plain.put(cfg("t", checkpoint_id=c1["id"]), c2, {}, {"y": "1"})
    with RedisSaver(server_url, prefix=prefix, ttl={"default_ttl": 1}) as short:
        short.put(cfg("t"), c1, {}, {"x": "1"})  # the same record again, under a ttl
        advance_time(client, prefix, 120)
    with RedisSaver(server_url, prefix=prefix) as plain:
        got = plain.get_tuple(cfg("t", checkpoint_id=c2["id"]))
        assert got is not None and got.checkpoint["channel_values"] == {"x": "value", "y": 1}
        assert [p for p in plain.check_invariants() if not p.stale] == []


def test_a_copy_onto_a_thread_under_a_ttl_leaves_every_blob_reachable(
    server_url: str, prefix: str, client: redis.Redis
) -> None:
    # Found by the model: a copy under a ttl onto a thread written without one replaced a
    # record; the replaced record's blob (no expiry) went into a loose-blob set that got the
    # ttl, and was reachable from nothing once the set expired.
    dst = make_checkpoint({"x": "kept"}, {"x": "1"})
    with RedisSaver(server_url, prefix=prefix) as plain:
        plain.put(cfg("dst"), dst, {}, {"x": "1"})
    src = make_checkpoint({"x": "copied"}, {"x": "2"})
    src["id"] = dst["id"]  # the copy replaces the target's record
    with RedisSaver(server_url, prefix=prefix, ttl={"default_ttl": 1}) as short:
        short.put(cfg("src"), src, {}, {"x": "2"})
        short.copy_thread("src", "dst")
        advance_time(client, prefix, 61)
        assert [p for p in short.check_invariants() if not p.stale] == []
        short.delete_thread("dst")
        assert keys_of(client, KeySchema(prefix).thread_keys_pattern("dst")) == []


def test_a_prune_keeps_loose_blobs_that_the_kept_checkpoint_shares(
    server_url: str, prefix: str, client: redis.Redis
) -> None:
    # Found by the model: prune dropped every loose blob from the loose set, also one the
    # kept checkpoint (with a ttl) shares but that never expires; once the checkpoint
    # expired, the blob was reachable from nothing.
    first = make_checkpoint({"x": "shared"}, {"x": "1"})
    with RedisSaver(server_url, prefix=prefix) as plain:
        plain.put(cfg("t"), first, {}, {"x": "1"})
    with RedisSaver(server_url, prefix=prefix, ttl={"default_ttl": 1}) as short:
        second = make_checkpoint({"x": "shared", "n": 2}, {"x": "1", "n": "1"})
        short.put(cfg("t", checkpoint_id=first["id"]), second, {}, {"n": "1"})
        short.prune(["t"], strategy="keep_latest")
        advance_time(client, prefix, 61)
        assert [p for p in short.check_invariants() if not p.stale] == []
        short.delete_thread("t")
        assert keys_of(client, KeySchema(prefix).thread_keys_pattern("t")) == []


def test_writes_stored_without_a_ttl_keep_their_checkpoint(
    server_url: str, prefix: str, client: redis.Redis
) -> None:
    # Found by the model: writes stored by a saver without a ttl never expire, while the
    # checkpoint they belong to (written with one) did: writes without a checkpoint.
    checkpoint = make_checkpoint({"n": 1}, {"n": "1"})
    with RedisSaver(server_url, prefix=prefix, ttl={"default_ttl": 1}) as short:
        config = short.put(cfg("t"), checkpoint, {}, {"n": "1"})
    with RedisSaver(server_url, prefix=prefix) as plain:
        plain.put_writes(config, [("n", 2)], "task")
        advance_time(client, prefix, 61)
        assert [p for p in plain.check_invariants() if not p.stale] == []
        tup = plain.get_tuple(cfg("t"))
        assert tup is not None and tup.checkpoint["channel_values"] == {"n": 1}
        assert tup.pending_writes == [("task", "n", 2)]


def test_writes_of_a_checkpoint_put_again_with_a_ttl_expire_with_it(
    server_url: str, prefix: str, client: redis.Redis
) -> None:
    # Found by the model: a record put again under a ttl keeps its pending writes, which had
    # none (stored without a ttl): once the record expired, writes without a checkpoint.
    checkpoint = make_checkpoint({"n": 1}, {"n": "1"})
    with RedisSaver(server_url, prefix=prefix) as plain:
        config = plain.put(cfg("t"), checkpoint, {}, {"n": "1"})
        plain.put_writes(config, [("n", 2)], "task")
    with RedisSaver(server_url, prefix=prefix, ttl={"default_ttl": 1}) as short:
        short.put(cfg("t"), checkpoint, {}, {"n": "1"})  # the same record again
        advance_time(client, prefix, 61)
        # a new put's sweep drops the expired record's index entry
        short.put(cfg("t"), make_checkpoint({"n": 3}, {"n": "2"}), {}, {"n": "2"})
        assert [p for p in short.check_invariants() if not p.stale] == []
        short.delete_thread("t")
        assert keys_of(client, KeySchema(prefix).thread_keys_pattern("t")) == []


def test_writes_renew_the_metadata_indexes_of_their_checkpoint(
    server_url: str, prefix: str, client: redis.Redis
) -> None:
    # Found by the model: put_writes renewed the checkpoint but not the global metadata
    # index holding it, which expired first (checkpoint without its metadata index entry).
    checkpoint = make_checkpoint({"n": 1}, {"n": "1"})
    with RedisSaver(server_url, prefix=prefix, ttl={"default_ttl": 1}) as saver:
        config = saver.put(cfg("t"), checkpoint, {"run_id": "r"}, {"n": "1"})
        advance_time(client, prefix, 30)
        saver.put_writes(config, [("n", 2)], "task")  # a long superstep: renewed now
        advance_time(client, prefix, 40)
        assert [p for p in saver.check_invariants() if not p.stale] == []
        listed = [t.checkpoint["id"] for t in saver.list(None, filter={"run_id": "r"})]
        assert listed == [checkpoint["id"]]


def test_keep_last_leaves_no_loose_set_behind(
    server_url: str, prefix: str, client: redis.Redis
) -> None:
    # Found by the model: blobs trimmed by keep_last stayed members of the loose-blob set
    # (the put drops only 8 parked ones), which, its members never expiring, never expired.
    channels = [f"c{i}" for i in range(12)]
    first = make_checkpoint({c: "persistent" for c in channels}, dict.fromkeys(channels, "1"))
    with RedisSaver(server_url, prefix=prefix) as plain:
        plain.put(cfg("t"), first, {}, dict.fromkeys(channels, "1"))
    with RedisSaver(server_url, prefix=prefix, ttl={"default_ttl": 1}, keep_last=1) as shallow:
        second = make_checkpoint({c: "persistent" for c in channels}, dict.fromkeys(channels, "1"))
        second["channel_values"]["n"] = 1
        second["channel_versions"]["n"] = "1"
        shallow.put(cfg("t", checkpoint_id=first["id"]), second, {}, {"n": "1"})  # 12 loose
        third = make_checkpoint({c: "changed" for c in channels}, dict.fromkeys(channels, "2"))
        shallow.put(
            cfg("t", checkpoint_id=second["id"]), third, {}, dict.fromkeys(channels, "2")
        )  # the 12 are trimmed
        advance_time(client, prefix, 61)
        keys = KeySchema(prefix)
        assert keys_of(client, f"{prefix}:lb:*") == []
        assert [p for p in shallow.check_invariants() if not p.stale] == []
        assert keys_of(client, keys.thread_keys_pattern("t")) == sorted(
            [
                keys.thread(keys.tag("t")),
                keys.index(keys.tag("t"), ""),
                keys.ledger(keys.tag("t"), ""),
            ]
        )  # the containers the first (ttl-less) put made, which never expire
