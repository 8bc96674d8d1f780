"""Hostile input, by property tests on the real server: arbitrary ids and metadata keep keys
distinct, filters exact and round trips exact; input that cannot be stored gets a clear error
and leaves the store unchanged."""

from __future__ import annotations

import math
import os
from typing import Any

import pytest
import redis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langgraph.checkpoint.base import get_checkpoint_metadata

from langgraph.checkpoint.rediskv import (
    RedisSaver,
    SerializationError,
    ServerFullError,
    ValueTooLargeError,
)
from langgraph.checkpoint.rediskv.core.limits import Limits
from langgraph.checkpoint.rediskv.errors import CopyInterruptedError

from ..conftest import PrivateServer, new_prefix, saver_with_limits, snapshot
from ..integration.test_contract import cfg, make_checkpoint

EXAMPLES = 150
property_settings = settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)

ids = st.text(max_size=40) | st.sampled_from(["", "a*", "k:x", "{t}", "%", "x" * 1100])
checkpoint_ids = st.text(min_size=1, max_size=40) | st.sampled_from(["a*", "k:x", "{t}", "%"])
scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**63 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20)
)
json_values = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=8,
)
metadata_keys = st.sampled_from(["source", "step", "user_id", "x", "ünï", "a:b", "m:x"])


def strictly_equal(a: Any, b: Any) -> bool:
    """Python equality, except that booleans equal only booleans (JSON types stay apart)."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(strictly_equal(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(strictly_equal(x, y) for x, y in zip(a, b, strict=True))
    return type(a) is type(b) and a == b


def as_stored(metadata: dict[str, Any]) -> dict[str, Any]:
    """What LangGraph keeps of metadata: NUL characters are removed from top-level strings."""
    return get_checkpoint_metadata({}, metadata)  # type: ignore[arg-type, return-value]


@pytest.mark.slow
@property_settings
@given(thread_a=ids, ns_a=ids, id_a=checkpoint_ids, thread_b=ids, ns_b=ids, id_b=checkpoint_ids)
def test_arbitrary_ids_round_trip_and_stay_apart(
    server_url: str, thread_a: str, ns_a: str, id_a: str, thread_b: str, ns_b: str, id_b: str
) -> None:
    with RedisSaver(server_url, prefix=new_prefix()) as saver:
        _round_trip_ids(saver, [(thread_a, ns_a, id_a, "A"), (thread_b, ns_b, id_b, "B")])


def _round_trip_ids(saver: RedisSaver, rows: list[tuple[str, str, str, str]]) -> None:
    written = {}
    for thread_id, ns, checkpoint_id, value in rows:
        version = saver.get_next_version(None, None)  # a version names one value, always
        checkpoint = make_checkpoint({"v": value}, {"v": version})
        checkpoint["id"] = checkpoint_id
        saver.put(cfg(thread_id, ns), checkpoint, {"who": value}, {"v": version})
        written[(thread_id, ns, checkpoint_id)] = value
    for (thread_id, ns, checkpoint_id), value in written.items():
        tup = saver.get_tuple(cfg(thread_id, ns, checkpoint_id))
        assert tup is not None
        assert tup.config == cfg(thread_id, ns, tup.checkpoint["id"])
        assert tup.checkpoint["channel_values"] == {"v": value}
        assert tup.metadata == {"who": value}
        listed = [(t.checkpoint["id"], t.metadata["who"]) for t in saver.list(cfg(thread_id, ns))]
        assert listed == sorted(
            [(i, v) for (t, n, i), v in written.items() if (t, n) == (thread_id, ns)], reverse=True
        )
    for thread_id in {row[0] for row in rows}:
        saver.delete_thread(thread_id)
    assert list(saver.list(None)) == []


@property_settings
@given(
    metadatas=st.lists(
        st.dictionaries(metadata_keys, json_values, max_size=4), min_size=1, max_size=6
    ),
    filter_from=st.integers(min_value=0, max_value=5),
    filter_keys=st.lists(metadata_keys, max_size=3, unique=True),
    extra=json_values,
)
@pytest.mark.slow
def test_filters_are_exact(
    server_url: str,
    metadatas: list[dict[str, Any]],
    filter_from: int,
    filter_keys: list[str],
    extra: Any,
) -> None:
    with RedisSaver(server_url, prefix=new_prefix()) as saver:
        ids_in_order = []
        for md in metadatas:
            checkpoint = make_checkpoint({}, {})
            saver.put(cfg("t"), checkpoint, md, {})  # type: ignore[arg-type]
            ids_in_order.append(checkpoint["id"])
        # filters built from stored values (so that some match) and from arbitrary ones
        source = metadatas[filter_from % len(metadatas)]
        for flt in [
            {k: source[k] for k in filter_keys if k in source},
            {k: extra for k in filter_keys},
            {k: source.get(k) for k in filter_keys},
        ]:
            expected = [
                cid
                for cid, md in zip(ids_in_order, metadatas, strict=True)
                if all(strictly_equal(as_stored(md).get(k), v) for k, v in flt.items())
            ][::-1]
            assert [t.checkpoint["id"] for t in saver.list(cfg("t"), filter=flt)] == expected, flt
            assert [t.checkpoint["id"] for t in saver.list(None, filter=flt)] == expected, flt
        stored = [t.metadata for t in saver.list(cfg("t"))][::-1]
        assert strictly_equal(stored, [as_stored(md) for md in metadatas])
        saver.delete_thread("t")


@pytest.mark.slow
@property_settings
@given(value=json_values)
def test_channel_values_round_trip_exactly(server_url: str, value: Any) -> None:
    with RedisSaver(server_url, prefix=new_prefix()) as saver:
        checkpoint = make_checkpoint({"v": value, "raw": b"\x00\xff"}, {"v": "1", "raw": "1"})
        saver.put(cfg("values"), checkpoint, {}, {"v": "1", "raw": "1"})
        tup = saver.get_tuple(cfg("values"))
        assert tup is not None
        assert strictly_equal(tup.checkpoint["channel_values"]["v"], value)
        assert tup.checkpoint["channel_values"]["raw"] == b"\x00\xff"
        saver.delete_thread("values")


def test_float_metadata_round_trips_exactly(saver: RedisSaver) -> None:
    checkpoint = make_checkpoint({}, {})
    saver.put(cfg("t"), checkpoint, {"score": 7.0, "tiny": 5e-324, "big": 2**62}, {})  # type: ignore[typeddict-unknown-key]
    tup = saver.get_tuple(cfg("t"))
    assert tup is not None
    assert tup.metadata == {"score": 7.0, "tiny": 5e-324, "big": 2**62}
    assert type(tup.metadata["score"]) is float and math.copysign(1, tup.metadata["tiny"]) == 1  # type: ignore[typeddict-item]


def test_metadata_that_cannot_be_encoded_changes_nothing(
    saver: RedisSaver, client: redis.Redis
) -> None:
    saver.put(cfg("t"), make_checkpoint({}, {}), {"step": 0}, {})
    before = snapshot(client, f"{saver.prefix}:*")
    with pytest.raises(SerializationError, match="cannot serialize the checkpoint metadata"):
        saver.put(cfg("t"), make_checkpoint({}, {}), {"step": 1, "bad": object()}, {})  # type: ignore[typeddict-unknown-key]
    assert snapshot(client, f"{saver.prefix}:*") == before


@pytest.mark.parametrize(
    ("flt", "message"),
    [
        ({"x": object()}, "cannot serialize the metadata value"),
        ({1: "a"}, "filter keys must be strings"),
        (["step", 1], "filter must be a dict"),
    ],
)
def test_filters_with_odd_types_get_clear_errors(saver: RedisSaver, flt: Any, message: str) -> None:
    saver.put(cfg("t"), make_checkpoint({}, {}), {"step": 0}, {})
    with pytest.raises(TypeError, match=message):
        list(saver.list(cfg("t"), filter=flt))


def test_a_value_too_large_for_the_server_changes_nothing(tmp_path: Any) -> None:
    server = PrivateServer(tmp_path, **{"proto-max-bulk-len": "1mb"}).start()
    admin = redis.Redis(port=server.port)
    try:
        with RedisSaver(server.url, prefix="big") as saver:
            small = make_checkpoint({"v": "small"}, {"v": "1"})
            saver.put(cfg("t"), small, {}, {"v": "1"})
            before = snapshot(admin, "big:*")
            huge = make_checkpoint({"v": os.urandom(2_000_000)}, {"v": "2"})  # incompressible
            with pytest.raises(
                # "u:b:<32 hex digits>;bytes\0" (a value that may serve as a base) and it
                ValueTooLargeError,
                match="a serialized value of 2000043 bytes is larger",
            ):
                saver.put(cfg("t", checkpoint_id=small["id"]), huge, {}, {"v": "2"})
            assert snapshot(admin, "big:*") == before
            tup = saver.get_tuple(cfg("t"))
            assert tup is not None and tup.checkpoint["channel_values"] == {"v": "small"}
    finally:
        admin.close()
        server.stop()


# -- two copies to one target, one of them discarded midway (found by review) -------------------


def put_chain(saver: RedisSaver, thread: str, n: int) -> list[str]:
    ids, parent = [], None
    for i in range(n):
        version = saver.get_next_version(None, None)
        checkpoint = make_checkpoint({"who": f"{thread}-{i}"}, {"who": version})
        saver.put(cfg(thread, checkpoint_id=parent), checkpoint, {"step": i}, {"who": version})
        parent = checkpoint["id"]
        ids.append(checkpoint["id"])
    return ids


class StepByStep:
    """An operation of a saver driven a request at a time, as its transport drives it."""

    def __init__(self, saver: RedisSaver, op: Any) -> None:
        self.saver, self.op = saver, op
        self.request: Any = next(op)
        self.done = False
        self.error: BaseException | None = None

    def step(self, fail: BaseException | None = None) -> None:
        try:
            if fail is not None:
                self.request = self.op.throw(fail)
            else:
                self.request = self.op.send(self.saver._send(self.request))
        except StopIteration:
            self.done = True
        except Exception as exc:
            self.done, self.error = True, exc

    def until(self, mode: str | None = None) -> None:
        """Up to the next import_thread call of `mode`; None: to the end."""
        while not self.done and not (
            mode
            and getattr(self.request, "name", "") == "import_thread"
            and mode in self.request.args
        ):
            self.step()


def begin_two_copies(saver: RedisSaver) -> tuple[StepByStep, StepByStep, list[str]]:
    """Copy A (s1 -> T) writes a chunk; a delete of T discards its job; copy B (s2 -> T)
    begins, and gets the job number A had (the target's jobs were all gone), and writes a
    chunk."""
    put_chain(saver, "s1", 3)
    s2 = put_chain(saver, "s2", 3)
    a = StepByStep(saver, saver._core.copy_thread("s1", "T"))
    a.until("chunk")
    a.step()
    saver.delete_thread("T")
    b = StepByStep(saver, saver._core.copy_thread("s2", "T"))
    b.until("chunk")
    b.step()
    return a, b, s2


def test_a_copy_whose_job_was_discarded_does_not_write_into_the_next_copys(
    server_url: str, prefix: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A job number comes again once a thread's jobs are all gone: A went on writing into
    B's job, and published it, T a mix of both sources, and B failed. A copy's job is its
    number and a token of its own now."""
    # a chunk per checkpoint
    with saver_with_limits(server_url, Limits(export_checkpoints=1), prefix=prefix) as saver:
        a, b, s2 = begin_two_copies(saver)
        a.until()
        b.until()
        assert isinstance(a.error, CopyInterruptedError) and b.error is None
        assert sorted(t.checkpoint["id"] for t in saver.list(cfg("T"))) == sorted(s2)
        assert saver.check_invariants() == []


def test_a_copy_refused_midway_discards_its_own_job_only(
    server_url: str, prefix: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A copy the server refuses midway discards its job; it reaped every job of the target,
    so the copy begun since was discarded too."""
    with saver_with_limits(server_url, Limits(export_checkpoints=1), prefix=prefix) as saver:
        a, b, s2 = begin_two_copies(saver)
        a.until("chunk")
        a.step(fail=ServerFullError("refused (test)"))  # A's next chunk, refused
        a.until()
        assert isinstance(a.error, ServerFullError)
        b.until()
        assert b.error is None
        assert sorted(t.checkpoint["id"] for t in saver.list(cfg("T"))) == sorted(s2)
        assert saver.check_invariants() == []


def test_a_copy_whose_job_a_reaper_began_discarding_does_not_publish(
    server_url: str, prefix: str
) -> None:
    """Found by review: delete_thread(T) while a copy into T runs reaps part of the copy's job
    in its first step (a step unlinks ~200 checkpoints); the job was still pending under its
    token, so the copy published what was left (60 of 260 checkpoints) and both calls
    returned. A job being discarded is marked so from the first step: the copy fails."""
    with RedisSaver(server_url, prefix=prefix) as saver:
        put_chain(saver, "s1", 260)
        copy = StepByStep(saver, saver._core.copy_thread("s1", "T"))
        copy.until("publish")  # every chunk written
        delete = StepByStep(saver, saver._core.delete_thread("T"))
        delete.step()  # (T out of the registry of live threads, core/deadlines.py)
        delete.step()  # its first step reaps part of the copy's job
        copy.until()
        delete.until()
        assert isinstance(copy.error, CopyInterruptedError) and delete.error is None
        assert list(saver.list(cfg("T"))) == []
        assert saver.check_invariants() == []


def test_a_copy_onto_an_existing_target_stopped_midway_says_what_stays(
    server_url: str, prefix: str, monkeypatch: pytest.MonkeyPatch, client: redis.Redis
) -> None:
    """Found by review: onto a target that exists, chunks go straight in; one refused because
    the target has a job pending said "the copy discarded", yet what was copied stays."""
    with saver_with_limits(server_url, Limits(export_checkpoints=1), prefix=prefix) as saver:
        own = put_chain(saver, "E", 2)
        source = put_chain(saver, "s2", 4)
        copy = StepByStep(saver, saver._core.copy_thread("s2", "E"))
        for _ in range(2):  # two chunks: the oldest two checkpoints of s2
            copy.until("chunk")
            copy.step()
        client.sadd(f"{prefix}:gc:{{E}}", "ttl:1")  # another client's job on E, pending
        client.hset(f"{prefix}:gc:{{E}}:1", "ttl", "0")
        copy.until()
        assert isinstance(copy.error, CopyInterruptedError)
        assert "the checkpoints copied before stay in the target" in str(copy.error)
        listed = sorted(t.checkpoint["id"] for t in saver.list(cfg("E")))
        assert listed == sorted([*own, *source[:2]])
