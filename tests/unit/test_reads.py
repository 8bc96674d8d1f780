"""get_tuple stepped with scripted replies in get_tuple.lua's shapes: no checkpoint, a
checkpoint read back as put wrote it (serialization round trips), a value lost to eviction,
bases held by the client, and a value whose base did not come with it."""

from __future__ import annotations

import datetime
import uuid
from typing import Any

import pytest
from langgraph.checkpoint.serde.encrypted import EncryptedSerializer
from redis.exceptions import ResponseError

from tests.unit.driver import (
    CheckpointLostError,
    Driver,
    PutCall,
    SaverCore,
    call,
    make_core,
)
from tests.unit.helpers import checkpoint_id, config, make_checkpoint

METADATA = {"source": "loop", "step": 1, "run_id": "run-1"}
HISTORY = [f"message number {i} of a long chat" for i in range(200)]


def stored(
    core: SaverCore,
    n: int,
    values: dict[str, Any],
    versions: dict[str, str],
    parent: int = 0,
    blobs: dict[str, bytes] | None = None,
) -> tuple[list[Any], dict[str, bytes]]:
    """get_tuple's reply for checkpoint n of thread t1 once put (from its put's call);
    ``blobs``: the blobs stored before, by ref (this put's are added)."""
    driver = Driver(core)
    if not core.registered:
        driver.expect(call("register_metadata_index", []))
    driver.expect(call("put_checkpoint", 0))
    parent_config = config("t1", "", checkpoint_id(parent)) if parent else config("t1")
    new = {ch: v for ch, v in versions.items()}
    driver.run(core.put(parent_config, make_checkpoint(n, values, versions), METADATA, new))
    driver.done()
    blobs = {} if blobs is None else blobs
    return PutCall(driver.calls("put_checkpoint")[0]).record(blobs), blobs


def test_no_checkpoint_is_none_and_the_call_is_as_get_tuple_lua_reads_it() -> None:
    core = make_core()
    driver = Driver(core).expect(call("get_tuple", None))
    assert driver.run(core.get_tuple(config("t1", "sub"))) is None
    driver.done()
    (request,) = driver.requests
    # (the registry of live threads: asked by the script when no key of the thread is left)
    assert request.keys == ("unit:idx:{t1}:sub", "unit:alive")
    assert request.args == ("unit", "{t1}", "sub", "", -1, 0)


ENCRYPTED = EncryptedSerializer.from_pycryptodome_aes(key=b"0123456789abcdef")


@pytest.mark.parametrize(
    "options",
    [{}, {"compression": None}, {"serde": ENCRYPTED}, {"keep_last": 1}],
    ids=["compressed", "uncompressed", "encrypted", "keep_last_1"],
)
def test_a_checkpoint_reads_back_as_it_was_put(options: dict[str, Any]) -> None:
    values = {
        "text": "héllo",
        "count": 3,
        "nested": {"a": [1, 2.5, None, True], "b": b"\x00\xff"},
        "when": datetime.datetime(2026, 1, 2, 3, 4, 5, tzinfo=datetime.timezone.utc),
        "id": uuid.UUID(int=7),
        "branch:to:node": None,  # a trigger channel: inside the record
        "messages": HISTORY,  # large: compressed, and a base
    }
    core = make_core(**options)
    record, _ = stored(core, 1, values, dict.fromkeys(values, "1"))
    assert record[2][record[6] - 1 :].startswith(b"2:")  # (large fields from `large` on)
    driver = Driver(core).expect(call("get_tuple", record))
    tup = driver.run(core.get_tuple(config("t1")))
    driver.done()
    assert tup is not None
    assert tup.config == config("t1", "", checkpoint_id(1))
    assert tup.parent_config is None
    assert tup.checkpoint == make_checkpoint(1, values, dict.fromkeys(values, "1"))
    assert tup.metadata == {"source": "loop", "step": 1, "run_id": "run-1"}
    assert tup.pending_writes == []
    # a second saver with the same settings (no bases held) reads the same
    reader = make_core(**options)
    driver = Driver(reader).expect(call("get_tuple", record))
    again = driver.run(reader.get_tuple(config("t1")))
    assert again is not None and again.checkpoint == tup.checkpoint


def test_pending_writes_read_back_in_task_path_order() -> None:
    core = make_core()
    record, _ = stored(core, 1, {"a": 1}, {"a": "1"})
    write_fields: list[bytes] = []
    for task, path, writes in (("task-b", "~2", [("x", 1)]), ("task-a", "~1", [("y", [2])])):
        driver = Driver(core).expect(call("put_writes", 1))
        driver.run(core.put_writes(config("t1", "", checkpoint_id(1)), writes, task, path))
        args = driver.requests[0].args
        write_fields += [str(args[6]).encode(), bytes(args[7])]
    record[4] = write_fields  # (the writes hash: written before the record, say)
    driver = Driver(core).expect(call("get_tuple", record))
    tup = driver.run(core.get_tuple(config("t1")))
    assert tup is not None
    assert tup.pending_writes == [("task-a", "y", [2]), ("task-b", "x", 1)]


def test_a_value_lost_to_eviction_is_checkpoint_lost_error() -> None:
    core = make_core()
    driver = Driver(core).expect(call("get_tuple", ResponseError("LOST unit:blob:{t1}::a:1 value")))
    with pytest.raises(CheckpointLostError) as raised:
        driver.run(core.get_tuple(config("t1")))
    driver.done()
    lost = raised.value
    assert (lost.thread_id, lost.what, lost.key) == ("t1", "value", "unit:blob:{t1}::a:1")


def test_a_base_the_client_holds_is_named_and_not_sent_back() -> None:
    core = make_core()
    record, _ = stored(core, 1, {"messages": HISTORY}, {"messages": "1"})
    # a fresh saver reads it: it holds no base yet, and learns the base from the read
    reader = make_core()
    driver = Driver(reader).expect(call("get_tuple", record))
    driver.run(reader.get_tuple(config("t1")))
    (base,) = reader.bases.of_namespace("{t1}", "")
    assert base.ref == "messages:1" and base.mark
    # the next read names it, and the script sends "" for it (held, same mark)
    held_record = [*record[:3], [b"messages:1", b""], *record[4:]]
    driver = Driver(reader).expect(call("get_tuple", held_record))
    tup = driver.run(reader.get_tuple(config("t1")))
    driver.done()
    assert driver.requests[0].args[5:] == (1, b"messages:1", base.mark)
    assert tup is not None and tup.checkpoint["channel_values"] == {"messages": HISTORY}


def test_a_value_sent_back_empty_that_the_client_does_not_hold_is_an_error() -> None:
    core = make_core()
    record, _ = stored(core, 1, {"messages": HISTORY}, {"messages": "1"})
    record[3] = [b"messages:1", b""]
    driver = Driver(make_core()).expect(call("get_tuple", record))
    with pytest.raises(ValueError) as raised:
        driver.run(driver.core.get_tuple(config("t1")))
    assert str(raised.value) == "the blob 'messages:1' came back empty, not held"


def test_a_value_read_without_its_base_names_the_channel_and_checkpoint() -> None:
    core = make_core()
    _, blobs = stored(core, 1, {"messages": HISTORY}, {"messages": "1"})
    record, _ = stored(
        core, 2, {"messages": [*HISTORY, "more"]}, {"messages": "2"}, parent=1, blobs=blobs
    )
    refs = record[3][::2]
    assert refs == [b"messages:2", b"messages:1"]  # the value, then its base
    record[3] = record[3][:2]  # the base missing from the reply
    driver = Driver(make_core()).expect(call("get_tuple", record))
    with pytest.raises(ValueError) as raised:
        driver.run(driver.core.get_tuple(config("t1")))
    assert str(raised.value) == (
        f"channel 'messages' of checkpoint {checkpoint_id(2)!r} in thread 't1' (namespace '') "
        "cannot be read: the blob 'messages:2' is read without its base 'messages:1'"
    )
