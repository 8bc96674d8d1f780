"""put and put_writes stepped with scripted replies: the retry paths of _write (REAPING,
missing blobs, a missing base, on a cluster INDEX) and what each retry sends."""

from __future__ import annotations

from typing import Any

import pytest

from tests.unit.driver import (
    LIST_MARGIN,
    REAP_STEP,
    REF_MARK,
    SCAN_COUNT,
    THREADS_BY_VALUE,
    Driver,
    PutCall,
    ScanKeys,
    ScriptCall,
    ScriptMismatch,
    batch,
    call,
    make_core,
    scan_keys,
    score_arg,
)
from tests.unit.helpers import checkpoint_id, config, make_checkpoint

METADATA = {"source": "loop", "step": 1}
REGISTERED = call("register_metadata_index", [])  # "?": every key registered already
# a value worth a base (compressed against by the next versions of its channel)
HISTORY = [f"message number {i} of a long chat" for i in range(200)]


def args_but_sweep(request: Any) -> tuple[Any, ...]:
    """A put_checkpoint call's arguments without ARGV[14] (the index sweep, drawn at random
    for each call)."""
    args = tuple(request.args)
    return args[:13] + args[14:]


def test_a_put_replying_reaping_reaps_the_thread_then_is_sent_again() -> None:
    core = make_core()
    driver = Driver(core).expect(
        REGISTERED,
        call("put_checkpoint", b"REAPING"),
        call("reap_thread", 2),
        call("reap_thread", 0),
        call("put_checkpoint", 0),
    )
    result = driver.run(
        core.put(config("t1"), make_checkpoint(1, {"a": "x"}), METADATA, {"a": "1"})
    )
    driver.done()
    assert result == config("t1", "", checkpoint_id(1))
    reaps = driver.calls("reap_thread")
    assert [(r.keys, r.args) for r in reaps] == [
        (("unit:gc:{t1}",), ("unit", "{t1}", REAP_STEP)),
        (("unit:gc:{t1}",), ("unit", "{t1}", REAP_STEP)),
    ]
    first, again = driver.calls("put_checkpoint")
    assert (
        first.keys
        == again.keys
        == (
            "unit:th:{t1}",
            "unit:idx:{t1}:",
            "unit:cp:{t1}::" + checkpoint_id(1),
        )
    )
    assert args_but_sweep(first) == args_but_sweep(again)
    assert driver.requests[0] == ScriptCall(
        "register_metadata_index", ("unit:mk",), ("?", "run_id", THREADS_BY_VALUE)
    )


def test_a_put_that_never_settles_gives_up_after_five_attempts() -> None:
    core = make_core()
    driver = Driver(core).expect(REGISTERED)
    for _ in range(5):
        driver.expect(call("put_checkpoint", b"REAPING"), call("reap_thread", 0))
    with pytest.raises(RuntimeError) as raised:
        driver.run(core.put(config("t1"), make_checkpoint(1), METADATA, {}))
    driver.done()
    assert str(raised.value) == (
        f"put of checkpoint {checkpoint_id(1)!r} in thread 't1' did not settle after 5 "
        "attempts (the thread keeps being deleted or pruned meanwhile)"
    )
    assert len(driver.calls("put_checkpoint")) == 5


def test_put_writes_replying_reaping_is_sent_again_unchanged() -> None:
    core = make_core()
    driver = Driver(core).expect(
        call("put_writes", b"REAPING"), call("reap_thread", 0), call("put_writes", 1)
    )
    assert (
        driver.run(core.put_writes(config("t1", "", checkpoint_id(1)), [("a", 5)], "task-1"))
        is None
    )
    driver.done()
    first, again = driver.calls("put_writes")
    assert first == again
    assert first.keys == (
        "unit:th:{t1}",
        "unit:wi:{t1}:",
        "unit:w:{t1}::" + checkpoint_id(1),
    )
    assert list(first.args[:6]) == ["unit", "{t1}", "", checkpoint_id(1), 0, 0]
    assert first.args[6] == "task-1:0"
    assert first.args[8] == "f"
    assert len(first.args) == 9


def stored_first(core: Any, values: dict[str, Any]) -> tuple[Driver, PutCall]:
    """The thread's first checkpoint, stored: its put's call."""
    driver = Driver(core).expect(REGISTERED, call("put_checkpoint", 0))
    driver.run(
        core.put(config("t1"), make_checkpoint(1, values), METADATA, dict.fromkeys(values, "1"))
    )
    driver.done()
    return driver, PutCall(driver.calls("put_checkpoint")[0])


def test_a_put_whose_shared_blob_is_gone_sends_it_again_with_the_checkpoint() -> None:
    core = make_core()
    stored_first(core, {"a": "kept", "b": "old"})
    second = make_checkpoint(2, {"a": "kept", "b": "new"}, {"a": "1", "b": "2"})
    driver = Driver(core).expect(call("put_checkpoint", [b"a:1"]), call("put_checkpoint", 0))
    driver.run(core.put(config("t1", "", checkpoint_id(1)), second, METADATA, {"b": "2"}))
    driver.done()
    first, again = (PutCall(c) for c in driver.calls("put_checkpoint"))
    assert first.parent_id == checkpoint_id(1)
    assert first.value_refs == again.value_refs == ["a:1", "b:2"]
    assert (list(first.blobs), first.shared) == (["b:2"], ["a:1"])
    assert (list(again.blobs), again.shared) == (["a:1", "b:2"], [])
    assert core.codec.loads(again.blobs["a:1"]) == "kept"
    assert core.codec.loads(again.blobs["b:2"]) == "new"


def test_a_put_whose_base_is_gone_sends_the_value_in_full() -> None:
    core = make_core()
    _, first_put = stored_first(core, {"messages": HISTORY})
    stored = first_put.blobs["messages:1"]
    assert stored.startswith(b"u:b:")  # stored as a base: with its mark
    longer = [*HISTORY, "one more"]
    second = make_checkpoint(2, {"messages": longer}, {"messages": "2"})
    driver = Driver(core).expect(call("put_checkpoint", [b"messages:1"]), call("put_checkpoint", 0))
    driver.run(core.put(config("t1", "", checkpoint_id(1)), second, METADATA, {"messages": "2"}))
    driver.done()
    against, in_full = (PutCall(c) for c in driver.calls("put_checkpoint"))
    assert against.base_refs == ["messages:1"]
    assert list(against.bases) == ["messages:1"]
    assert against.blobs["messages:2"].startswith(REF_MARK.encode() + b"messages:1;")
    assert in_full.base_refs == [] and in_full.bases == {}
    assert in_full.blobs["messages:2"].startswith(b"u:b:")  # a new base, in full
    # the full value reads back alone, with no base
    stored_values: dict[str, bytes] = {}
    record = in_full.record(stored_values)
    decoded = core.codec.decode_record("t1", record)
    assert decoded.checkpoint["channel_values"] == {"messages": longer}


def test_a_cluster_put_replying_index_enters_the_lists_then_is_sent_again_with_the_hint() -> None:
    core = make_core(cluster=True)
    index_reply = [b"INDEX", b"inc7", b"source:%22loop%22", b"544258256797702"]
    driver = Driver(core).expect(
        call(
            "register_metadata_index",
            [],
            lambda c: c.args == ("?", THREADS_BY_VALUE),
        ),
        call("put_checkpoint", index_reply),
        batch(["enter_thread_list", "thread_list_registry"], [[], []]),
        call("put_checkpoint", 0),
    )
    driver.run(core.put(config("t1"), make_checkpoint(1, {"a": "x"}), METADATA, {"a": "1"}))
    driver.done()
    enter, registry = driver.requests[2].calls
    bound = score_arg(544258256797702 + LIST_MARGIN)
    assert (enter.keys, enter.args) == (("unit:tm:source:%22loop%22",), ("{t1}inc7", bound))
    assert registry.args[0] == "enter" and list(registry.args[2:]) == [bound, "source:%22loop%22"]
    first, again = driver.calls("put_checkpoint")
    assert str(first.args[10]).startswith("~;;")  # no incarnation known yet
    hint = str(again.args[10]).split(";")
    assert hint[:2] == ["~inc7", f"source:%22loop%22={bound}"]
    assert core.list_cache.get("{t1}") == ("inc7", {"source:%22loop%22": float(bound)})


def test_a_request_out_of_script_names_the_one_that_came_and_the_one_expected() -> None:
    core = make_core()
    driver = Driver(core).expect(REGISTERED, call("put_writes", 1))
    with pytest.raises(ScriptMismatch) as raised:
        driver.run(core.put(config("t1"), make_checkpoint(1), METADATA, {}))
    assert str(raised.value) == (
        "request #2: ScriptCall['put_checkpoint'] keys=['unit:th:{t1}', 'unit:idx:{t1}:', "
        f"'unit:cp:{{t1}}::{checkpoint_id(1)}'] came where ScriptCall['put_writes'] was expected"
    )


@pytest.mark.parametrize(
    ("stored_indexes", "state"), [([], "ready"), ([b"unit:idx:{t0}:"], "building")]
)
def test_the_first_put_registers_an_unregistered_index_ready_only_on_an_empty_store(
    stored_indexes: list[bytes], state: str
) -> None:
    core = make_core()
    missing = [b"run_id", THREADS_BY_VALUE.encode()]
    driver = Driver(core).expect(
        call("register_metadata_index", missing),
        scan_keys(stored_indexes),
        call("register_metadata_index", 2),
        call("put_checkpoint", 0),
    )
    driver.run(core.put(config("t1"), make_checkpoint(1), METADATA, {}))
    driver.done()
    asked, entered = driver.calls("register_metadata_index")
    assert asked.args == ("?", "run_id", THREADS_BY_VALUE)
    assert entered.args == (state, *missing)
    assert driver.requests[1] == ScanKeys("unit:idx:*", SCAN_COUNT)
    # registered once per saver: the next put goes straight to its script
    driver = Driver(core).expect(call("put_checkpoint", 0))
    driver.run(core.put(config("t1", "", checkpoint_id(1)), make_checkpoint(2), METADATA, {}))
    driver.done()
