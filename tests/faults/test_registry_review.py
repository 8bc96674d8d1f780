"""Hostile review of 4fba1ad, the registry of live threads (P:alive,
lua/thread_deadlines.lua): each test states what must hold; those still open are xfail.

False alarms (a thread legitimately deleted or expired raises ThreadLostError), threads the
design claims to detect that are evicted silently, and round trips the hot path pays."""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
import redis

from langgraph.checkpoint.rediskv import RedisSaver
from langgraph.checkpoint.rediskv.core import deadlines
from langgraph.checkpoint.rediskv.core.state import NOTED_CACHE_SIZE
from langgraph.checkpoint.rediskv.errors import ThreadLostError
from langgraph.checkpoint.rediskv.keys import KeySchema

from ..compat.previous import OldSaver, installed_release
from ..conftest import RoundTrips, due_threads
from ..integration.test_contract import cfg, chain, make_checkpoint

HOUR = {"default_ttl": 60}
DAY = {"default_ttl": 1440}
THREE_SECONDS = {"default_ttl": 0.05}


def evict_whole(client: redis.Redis, keys: KeySchema, thread: str) -> None:
    """Unlink every key of the thread, as an eviction that took them all does."""
    thread_keys = list(client.scan_iter(match=keys.thread_keys_pattern(thread)))
    assert thread_keys
    client.unlink(*thread_keys)


def put_one(saver: RedisSaver, thread: str, step: int) -> str:
    """One more checkpoint on the thread (its parent: the newest)."""
    latest = saver.get_tuple(cfg(thread))
    parent = latest.checkpoint["id"] if latest else None
    version = saver.get_next_version(None, None)
    checkpoint = make_checkpoint({"n": step}, {"n": version})
    saver.put(cfg(thread, checkpoint_id=parent), checkpoint, {"step": step}, {"n": version})
    return checkpoint["id"]


@pytest.fixture
def hour_saver(server_url: str, prefix: str) -> Iterator[RedisSaver]:
    with RedisSaver(server_url, prefix=prefix, ttl=HOUR) as s:
        yield s


# -- false alarms --------------------------------------------------------------------------


def test_a_put_racing_a_delete_does_not_make_the_deleted_thread_lost(
    server_url: str, prefix: str, client: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A thread's first put replies its deadline; the note is a second round trip. A
    delete_thread (forget, delete, forget) that lands between the two leaves the note after
    its second forget: the deleted thread is due for the whole ttl, and every read of the id
    raises ThreadLostError (a new conversation on it cannot even start)."""
    keys = KeySchema(prefix)
    original = deadlines.note_put
    with (
        RedisSaver(server_url, prefix=prefix, ttl=HOUR) as writer,
        RedisSaver(server_url, prefix=prefix, ttl=HOUR) as app,
    ):

        def racing(core: Any, tag: str, deadline: int) -> Any:
            app.delete_thread("t")  # the user deletes the chat as its first turn is saved
            yield from original(core, tag, deadline)

        monkeypatch.setattr(deadlines, "note_put", racing)
        chain(writer, "t", [{"step": 0}])
        monkeypatch.setattr(deadlines, "note_put", original)
        assert client.exists(keys.thread(keys.tag("t"))) == 0  # deleted
        assert app.get_tuple(cfg("t")) is None  # raises ThreadLostError today
        assert due_threads(client, prefix) == []  # (the late note made it due)


def test_a_thread_deleted_by_0_1_0_and_started_again_under_a_shorter_ttl_is_not_lost(
    server_url: str, prefix: str, client: redis.Redis
) -> None:
    """Rolling upgrade, two ttls on one prefix. This release notes the thread for an hour;
    0.1.0 deletes it (the ledger of "" stays, as designed); a saver with a 3 s ttl starts a new
    conversation on the id: its put finds a ledger the root does not name and UNLINKs it, then
    makes it again with 3 s. The invariant "the ledger of '' outlives every noted deadline"
    is broken: once the 3 s pass, nothing of the thread is left and the registry says it is
    due for an hour, so a thread that simply expired raises ThreadLostError."""
    installed_release()
    old = OldSaver(server_url, prefix, {})
    try:
        with (
            RedisSaver(server_url, prefix=prefix, ttl=HOUR) as long_lived,
            RedisSaver(server_url, prefix=prefix, ttl=THREE_SECONDS) as short_lived,
        ):
            chain(long_lived, "t", [{"step": 0}])
            old.call("delete_thread", "t")
            assert short_lived.get_tuple(cfg("t")) is None  # (deleted: reads as such)
            chain(short_lived, "t", [{"step": 0}])
            time.sleep(4.5)  # (real time: its 3 s ttl runs out; no eviction at all)
            assert short_lived.get_tuple(cfg("t")) is None  # raises ThreadLostError today
    finally:
        old.close()


def test_savers_of_two_ttls_and_a_prune_leave_no_false_alarm(
    server_url: str, prefix: str, client: redis.Redis
) -> None:
    """The same break of "the ledger of '' outlives every noted deadline" with this release
    alone: two savers of one prefix, one hour and 3 s. The hour saver notes the thread; the
    3 s saver's checkpoint becomes the only one (prune keep_latest here; a shallow 3 s saver
    trims the same way); it expires and a read drops it, emptying the root (the ledger stays,
    a tombstone). The next put finds a ledger the root does not name and UNLINKs it: the new
    ledger lives 3 s, the registry says an hour, and a thread that simply expired raises."""
    with (
        RedisSaver(server_url, prefix=prefix, ttl=HOUR) as long_lived,
        RedisSaver(server_url, prefix=prefix, ttl=THREE_SECONDS) as short_lived,
    ):
        chain(long_lived, "t", [{"step": 0}])  # (noted: due for an hour)
        put_one(short_lived, "t", 1)
        long_lived.prune(["t"])  # keep_latest: the 3 s checkpoint alone stays
        time.sleep(4)
        assert short_lived.get_tuple(cfg("t")) is None  # (expired: reads as new)
        put_one(short_lived, "t", 2)  # a new conversation on the id
        time.sleep(4)
        assert short_lived.get_tuple(cfg("t")) is None  # raises ThreadLostError today


# -- silent loss where detection is claimed -------------------------------------------------


def test_delete_for_runs_does_not_unregister_threads_it_leaves(
    hour_saver: RedisSaver, prefix: str, client: redis.Redis
) -> None:
    """delete_for_runs forgets every candidate thread (those the runs' index names; when
    that index is not complete, every thread of the prefix, from a SCAN), though most keep
    their checkpoints. A thread it left, idle afterwards, is out of the registry until its
    deadline: evicted whole, it reads as new. Here "a" keeps its checkpoint of run r0."""
    keys = KeySchema(prefix)
    chain(hour_saver, "a", [{"run_id": "r0", "step": 0}, {"run_id": "r1", "step": 1}])
    hour_saver.delete_for_runs(["r1"])
    assert hour_saver.get_tuple(cfg("a")) is not None  # (a keeps r0's checkpoint)
    evict_whole(client, keys, "a")
    with pytest.raises(ThreadLostError):  # fails: reads as a new thread
        hour_saver.get_tuple(cfg("a"))


def test_a_thread_given_a_longer_ttl_stays_registered(
    hour_saver: RedisSaver, prefix: str, client: redis.Redis
) -> None:
    """set_thread_ttl forgets the thread and relies on "the next put" to note it again. The
    usual reason to lengthen a thread's ttl is to keep an idle conversation: no put comes,
    and the thread is unregistered for its whole (now longer) life. The ttl job rewrote every
    deadline; it could reply the new one to note."""
    keys = KeySchema(prefix)
    chain(hour_saver, "t", [{"step": 0}])
    hour_saver.set_thread_ttl("t", timedelta(days=2))
    evict_whole(client, keys, "t")
    with pytest.raises(ThreadLostError):  # fails: reads as a new thread
        hour_saver.get_tuple(cfg("t"))


def test_another_saver_notes_a_thread_again_after_its_ttl_is_shortened(
    server_url: str, prefix: str, client: redis.Redis
) -> None:
    """The docs bound the silent window after a ttl change to 1/16 of the ttl for a thread
    another saver writes. But that saver's cache keeps the deadline it noted under the old,
    longer ttl, and it notes again only once a put's deadline exceeds it by 1/16: after a
    shortening from a day to a minute, for about a day. Here its put comes 5 s (> 60/16 s)
    after the change and notes nothing."""
    keys = KeySchema(prefix)
    with (
        RedisSaver(server_url, prefix=prefix, ttl=DAY) as worker,
        RedisSaver(server_url, prefix=prefix, ttl=DAY) as admin,
    ):
        chain(worker, "t", [{"step": 0}])
        admin.set_thread_ttl("t", 1)  # one minute
        time.sleep(5)  # more than 1/16 of the thread's new ttl
        put_one(worker, "t", 1)
        assert due_threads(client, prefix) == [keys.tag("t")]  # fails: nothing noted
        evict_whole(client, keys, "t")
        with pytest.raises(ThreadLostError):
            worker.get_tuple(cfg("t"))


@pytest.mark.xfail(
    raises=pytest.fail.Exception,
    strict=False,
    reason=("issue 31 follow-up: a copy is noted by its first put, not by the copy"),
)
def test_a_copied_thread_is_registered(
    hour_saver: RedisSaver, prefix: str, client: redis.Redis
) -> None:
    """copy_thread writes the target with the saver's ttl and ledger entries
    (import_thread.lua's note_deadline) but notes nothing in the registry ("a copy only adds
    to its target"): a fork that is read but not yet written (or never: an archived copy)
    evicted whole reads as a new thread. The docs' list of what stays silent does not name
    copies."""
    keys = KeySchema(prefix)
    chain(hour_saver, "source", [{"step": i} for i in range(2)])
    hour_saver.copy_thread("source", "copy")
    assert hour_saver.get_tuple(cfg("copy")) is not None
    evict_whole(client, keys, "copy")
    with pytest.raises(ThreadLostError):  # fails: reads as a new thread
        hour_saver.get_tuple(cfg("copy"))


# -- cost ---------------------------------------------------------------------------------


@pytest.mark.xfail(
    raises=AssertionError,
    reason=(
        "issue 31 follow-up: the saver remembers the 10,000 threads noted last; "
        "one idle while 10,000 others start pays one round trip more"
    ),
)
def test_a_busy_threads_put_does_not_note_again_after_many_other_threads(
    hour_saver: RedisSaver, prefix: str, client: redis.Redis, round_trips: RoundTrips
) -> None:
    """The saver's memory of noted deadlines keeps the NOTED_CACHE_SIZE threads used most
    recently (NotedDeadlines.last refreshes a thread's entry at each put): once that many
    other chats started while this one was idle (10,000, a busy server within ttl/16), its
    next put pays a second round trip, however recently it was noted."""
    keys = KeySchema(prefix)
    tag = keys.tag("t")
    chain(hour_saver, "t", [{"step": 0}])
    deadline = int(client.zscore(keys.live_threads(), tag) or 0)
    noted = hour_saver._core.noted_deadlines
    for i in range(NOTED_CACHE_SIZE):  # as 10,000 other chats' first puts would
        noted.noted(f"{{other-{i}}}", deadline)
    version = hour_saver.get_next_version(None, None)
    checkpoint = make_checkpoint({"n": 1}, {"n": version})
    latest = hour_saver.get_tuple(cfg("t"))
    assert latest is not None
    round_trips.reset()
    hour_saver.put(cfg("t", checkpoint_id=latest.checkpoint["id"]), checkpoint, {}, {"n": version})
    assert round_trips.count == 1  # fails: 2, the put and a note


def test_the_first_read_of_a_new_chat_without_any_ttl_costs_one_round_trip(
    saver: RedisSaver, round_trips: RoundTrips
) -> None:
    """No ttl configured: the registry can only hold threads of other savers, yet every read
    of a new chat (LangGraph's first get_tuple of each conversation) paid a second round trip
    to ask it. On a standalone server get_tuple.lua and list_checkpoints.lua ask it
    themselves (the scripts already touch prefix keys outside the thread's slot there: P:mk
    in put_checkpoint.lua); on a cluster the registry's node is another, and the client
    asks."""
    assert saver.get_tuple(cfg("warm")) is None  # (scripts loaded)
    round_trips.reset()
    assert saver.get_tuple(cfg("new")) is None
    assert round_trips.count == 1
    round_trips.reset()
    assert list(saver.list(cfg("new"))) == []
    assert round_trips.count == 1


@pytest.mark.parametrize("skew", [7200, -72000], ids=["2 h ahead", "20 h behind"])
def test_a_client_clock_off_by_hours_neither_notes_every_put_nor_too_late(
    hour_saver: RedisSaver,
    prefix: str,
    client: redis.Redis,
    round_trips: RoundTrips,
    monkeypatch: pytest.MonkeyPatch,
    skew: int,
) -> None:
    """Whether a put's deadline is noted again (it moved by 1/16 of the ttl) is decided on the
    server's clock alone. Measured on the client's, as (deadline - client clock) / 16 (until
    this test): two hours ahead with a 1 h ttl made it negative, and every put a second after
    the last noted again (a second round trip per turn); twenty hours behind made it 1.3 h,
    longer than the ttl, so the registry's deadline went stale and an eviction after it read
    as a new thread."""
    real = time.time
    monkeypatch.setattr(time, "time", lambda: real() + skew)
    keys = KeySchema(prefix)
    tag = keys.tag("t")
    chain(hour_saver, "t", [{"step": 0}])
    first = int(client.zscore(keys.live_threads(), tag) or 0)
    assert hour_saver._core.noted_deadlines.threads[tag] == first
    time.sleep(1.1)  # (the next deadline is a second later: less than 1/16 of an hour)
    round_trips.reset()
    put_one(hour_saver, "t", 2)
    assert round_trips.count == 2  # a get and the put: no note
    assert int(client.zscore(keys.live_threads(), tag) or 0) == first
    # as if noted five minutes ago: the deadline moved by more than 1/16 h (225 s)
    hour_saver._core.noted_deadlines.noted(tag, first - 300)
    round_trips.reset()
    put_one(hour_saver, "t", 3)
    assert round_trips.count == 3  # the get, the put and its note
    renewed = int(client.zscore(keys.live_threads(), tag) or 0)
    assert first < renewed <= first + 3
    assert hour_saver._core.noted_deadlines.threads[tag] == renewed
