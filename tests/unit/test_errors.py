"""Error replies thrown into an operation, as the transports throw them: an operation that
began something undoes it, then the error comes out as the saver names it."""

from __future__ import annotations

import pytest
from redis.exceptions import ResponseError

from langgraph.checkpoint.rediskv.errors import CheckpointLostError, ThreadLostError
from tests.unit.driver import REAP_STEP, Driver, ServerFullError, call, make_core
from tests.unit.helpers import config

OOM = ResponseError("OOM command not allowed when used memory > 'maxmemory'.")


def test_a_copy_to_a_new_thread_stopped_by_a_full_server_discards_its_own_job() -> None:
    core = make_core()
    blob = [b"b", b"", b"a:1", b"msgpack\x00\x01"]
    driver = Driver(core).expect(
        call("import_thread", 3),  # begin: job 3 (a new target)
        call("export_thread", [None, *blob]),  # the source's one chunk
        call("import_thread", OOM),  # its chunk refused: the server is full
        call("reap_thread", 0),  # the copy's own job discarded at once
    )
    with pytest.raises(ServerFullError) as raised:
        driver.run(core.copy_thread("src", "dst"))
    driver.done()
    assert str(raised.value).startswith(
        "the Redis server is over its maxmemory and refused import_thread; nothing was written"
    )
    begin, refused = driver.calls("import_thread")
    token = str(begin.args[4]).split(":")[1]
    assert begin.args[:5] == ("unit", "{dst}", 0, "begin", f"0:{token}")
    assert refused.args[3:5] == ("chunk", f"3:{token}")
    assert list(refused.args[6:]) == blob
    (discard,) = driver.calls("reap_thread")
    assert discard.keys == ("unit:gc:{dst}",)
    assert discard.args == ("unit", "{dst}", REAP_STEP, "copy:3", token)


def test_an_error_reply_an_operation_does_not_expect_comes_out_translated() -> None:
    core = make_core()
    driver = Driver(core).expect(call("register_metadata_index", OOM))
    with pytest.raises(ServerFullError):
        driver.run(core.register_metadata_index())
    assert core.registered == []  # (not taken as registered)


@pytest.mark.parametrize(
    ("reply", "kind", "what"),
    [
        # a thread that lost every key while the registry of live threads holds it as due
        # (include/records.lua's untraced, on a standalone server)
        ("LOST unit:th:{t1} thread due 1795928532", ThreadLostError, "thread"),
        # its root alone evicted (include/ledger.lua's missing_root): not a ThreadLostError
        ("LOST unit:th:{t1} thread root", CheckpointLostError, "thread root"),
    ],
)
def test_a_read_that_lost_its_thread_says_how(
    reply: str, kind: type[CheckpointLostError], what: str
) -> None:
    core = make_core()
    driver = Driver(core).expect(call("get_tuple", ResponseError(reply)))
    with pytest.raises(CheckpointLostError) as lost:
        driver.run(core.get_tuple(config("t1")))
    assert type(lost.value) is kind
    assert (lost.value.thread_id, lost.value.what, lost.value.key) == ("t1", what, "unit:th:{t1}")
    if kind is ThreadLostError:
        assert lost.value.deadline == 1795928532  # type: ignore[attr-defined]
