"""The registry of live threads (core/deadlines.py, lua/thread_deadlines.lua) stepped with
scripted replies: when a put notes its deadline, what a read that finds no key of its thread
asks, and what the operations that empty a thread forget."""

from __future__ import annotations

import time
from collections import OrderedDict
from typing import Any

import pytest

from langgraph.checkpoint.rediskv.core.state import ListCache, NotedDeadlines
from langgraph.checkpoint.rediskv.errors import ThreadLostError
from langgraph.checkpoint.rediskv.settings import TTLSettings
from tests.unit.driver import Driver, SaverCore, call, make_core
from tests.unit.helpers import checkpoint_id, config, make_checkpoint
from tests.unit.test_reads import stored

HOUR = 3600


def put_replying(core: SaverCore, driver: Driver, deadline: int, n: int, notes: bool) -> None:
    """A put of checkpoint n of thread t1 whose script replies ``deadline``; ``notes``: the
    saver then notes it in the registry."""
    driver.expect(call("put_checkpoint", deadline))
    if notes:
        driver.expect(call("thread_deadlines", 1))  # (taken)
    checkpoint = make_checkpoint(n, {"a": n}, {"a": str(n)})
    driver.run(core.put(config("t1"), checkpoint, {}, {"a": str(n)}))


def test_a_put_sends_the_deadline_noted_last_and_notes_what_the_script_replies() -> None:
    """The script decides whether the deadline moved enough to be noted again (on the
    server's clock: put_checkpoint.lua's NOTE_EVERY); the saver sends the one it noted last
    (0: none) and notes any deadline the put replies."""
    core = make_core(ttl=TTLSettings(HOUR))
    core.registered.append(True)
    now = int(time.time())
    driver = Driver(core)
    put_replying(core, driver, 0, 1, False)  # (no deadline, or one that moved too little)
    put_replying(core, driver, now + HOUR, 2, True)
    put_replying(core, driver, 0, 3, False)
    put_replying(core, driver, now + HOUR + 300, 4, True)
    driver.done()
    assert [r.args[14] for r in driver.calls("put_checkpoint")] == [
        0,
        0,
        now + HOUR,
        now + HOUR,
    ]
    notes = driver.calls("thread_deadlines")
    assert [(r.keys, tuple(r.args)) for r in notes] == [
        (("unit:alive",), ("note", now + HOUR, "{t1}")),
        (("unit:alive",), ("note", now + HOUR + 300, "{t1}")),
    ]
    assert core.noted_deadlines.threads == {"{t1}": now + HOUR + 300}


def test_on_a_standalone_server_a_read_declares_the_registry_for_its_script_to_ask() -> None:
    """The script asks the registry itself (include/records.lua's untraced): a new thread
    reads as new in one call, a thread evicted whole raises at once (the error it replies:
    test_errors)."""
    core = make_core()
    driver = Driver(core).expect(call("get_tuple", None), call("list_checkpoints", [None]))
    assert driver.run(core.get_tuple(config("t1"))) is None
    assert driver.stream(core.list_checkpoints(config("t1"))) == []
    driver.done()
    (read,) = driver.calls("get_tuple")
    (page,) = driver.calls("list_checkpoints")
    assert (read.keys, page.keys) == (
        ("unit:idx:{t1}:", "unit:alive"),
        ("unit:th:{t1}", "unit:alive"),
    )


# On a cluster the registry lives on another node than the thread: the read's script replies
# 0 when no key of the thread is left, and the client asks the registry, then reads again.


def test_a_read_that_finds_no_key_asks_the_registry_and_reads_new_when_not_due() -> None:
    core = make_core(cluster=True)
    driver = Driver(core).expect(call("get_tuple", 0), call("thread_deadlines", None))
    assert driver.run(core.get_tuple(config("t1"))) is None
    driver.done()
    (read,) = driver.calls("get_tuple")
    assert read.keys == ("unit:idx:{t1}:",)  # (no key of another slot)
    (ask,) = driver.calls("thread_deadlines")
    assert (ask.keys, tuple(ask.args)) == (("unit:alive",), ("due", "{t1}"))


def test_a_read_of_a_due_thread_that_finds_no_key_twice_raises_thread_lost() -> None:
    core = make_core(cluster=True)
    deadline = int(time.time()) + HOUR
    driver = Driver(core).expect(
        call("get_tuple", 0), call("thread_deadlines", deadline), call("get_tuple", 0)
    )
    with pytest.raises(ThreadLostError) as lost:
        driver.run(core.get_tuple(config("t1")))
    driver.done()
    assert (lost.value.thread_id, lost.value.what, lost.value.key, lost.value.deadline) == (
        "t1",
        "thread",
        "unit:th:{t1}",
        deadline,
    )


def test_a_read_that_races_a_writer_starting_the_thread_again_returns_its_checkpoint() -> None:
    core = make_core(cluster=True)
    record, _ = stored(core, 1, {"a": "x"}, {"a": "1"})
    driver = Driver(core).expect(
        call("get_tuple", 0),
        call("thread_deadlines", int(time.time()) + HOUR),
        call("get_tuple", record),
    )
    got = driver.run(core.get_tuple(config("t1")))
    driver.done()
    assert got is not None and got.checkpoint["id"] == checkpoint_id(1)


def test_a_list_that_finds_no_key_asks_the_registry() -> None:
    core = make_core(cluster=True)
    deadline = int(time.time()) + HOUR
    driver = Driver(core).expect(
        call("list_checkpoints", 0), call("thread_deadlines", deadline), call("list_checkpoints", 0)
    )
    with pytest.raises(ThreadLostError):
        driver.stream(core.list_checkpoints(config("t1")))
    driver.done()
    first, again = driver.calls("list_checkpoints")
    assert first.args[2] == again.args[2] == "0u"
    assert first.keys == again.keys == ("unit:th:{t1}",)


class DroppedBetweenSteps(OrderedDict):  # type: ignore[type-arg]
    """A cache's dict where another thread's delete (its drop) lands right after each lookup
    and each write: the interleaving a sync saver's threads can produce."""

    def get(self, key: Any, default: Any = None) -> Any:
        value = super().get(key, default)
        self.pop(key, None)
        return value

    def __setitem__(self, key: Any, value: Any) -> None:
        super().__setitem__(key, value)
        self.pop(key, None)


def test_the_savers_caches_stay_whole_when_a_delete_drops_a_thread_between_their_steps() -> None:
    """A sync saver's threads share its caches: a put looks its thread up, or writes it, and
    then moves it to the end, while another thread's delete drops it in between (unguarded,
    the move raised KeyError and the put failed). The noted deadlines, and on a cluster the
    list cache."""
    noted = NotedDeadlines()
    noted.threads = DroppedBetweenSteps()
    OrderedDict.__setitem__(noted.threads, "{t}", 123)  # (noted before: no drop)
    assert noted.last("{t}") == 123
    noted.noted("{t}", 456)
    assert noted.last("{t}") == 0  # (dropped: the next put notes it again)
    lists = ListCache()
    lists.threads = DroppedBetweenSteps()
    lists.put("{t}", "1", {"s": 1.0})
    assert lists.get("{t}") is None


def test_delete_forgets_the_thread_before_and_after() -> None:
    core = make_core()
    core.noted_deadlines.noted("{t1}", 123)
    driver = Driver(core).expect(
        call("thread_deadlines", 1), call("delete_thread", 0), call("thread_deadlines", 1)
    )
    driver.run(core.delete_thread("t1"))
    driver.done()
    assert [tuple(r.args) for r in driver.calls("thread_deadlines")] == [("deleted", "{t1}")] * 2
    assert core.noted_deadlines.threads == {}  # (the next put notes it again)


def test_a_note_the_registry_refuses_is_sent_again_by_the_next_put() -> None:
    """A note refused (the thread was deleted less than a minute ago, and the note may be of
    a put that raced the delete) is not taken for noted."""
    core = make_core(ttl=TTLSettings(HOUR))
    core.registered.append(True)
    now = int(time.time())
    driver = Driver(core)
    driver.expect(call("put_checkpoint", now + HOUR), call("thread_deadlines", 0))
    checkpoint = make_checkpoint(1, {"a": 1}, {"a": "1"})
    driver.run(core.put(config("t1"), checkpoint, {}, {"a": "1"}))
    assert core.noted_deadlines.threads == {}
    put_replying(core, driver, now + HOUR + 1, 2, True)
    driver.done()
    assert core.noted_deadlines.threads == {"{t1}": now + HOUR + 1}
