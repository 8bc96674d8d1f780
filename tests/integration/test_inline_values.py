"""LangGraph's trigger channels live inside their checkpoint's record, not in blob keys.

A ``branch:to:<node>`` channel holds None each time its node is triggered: a blob key for it
costs about 180 bytes of Redis memory and a ref in the record. Checked here: which values are
inlined (trigger channels holding None, nothing else: any other channel may be a delta
channel's seed), that they read back, that a record written before inlining still reads, that
an older reader refuses an inlined record instead of dropping its values, and that copies,
prunes, keep_last and encryption keep them.
"""

from __future__ import annotations

from typing import Any

import pytest
import redis
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.serde.encrypted import EncryptedSerializer

from langgraph.checkpoint.rediskv import RedisSaver
from langgraph.checkpoint.rediskv.compression import with_compression
from langgraph.checkpoint.rediskv.core import INLINE_MARK, writes
from langgraph.checkpoint.rediskv.keys import decode_part

from ..conftest import keys_of, record_of
from .test_contract import cfg, make_checkpoint

BIG = "a sentence of real length, long enough to stay a blob of its own. " * 2


def blob_channels(client: redis.Redis, prefix: str) -> set[str]:
    return {decode_part(key.rsplit(":", 2)[1]) for key in keys_of(client, f"{prefix}:blob:*")}


def put(
    saver: RedisSaver,
    thread: str,
    values: dict[str, Any],
    parent: str | None = None,
    new: set[str] | None = None,
    version: str = "1",
) -> Any:
    versions = {channel: version for channel in values}
    checkpoint = make_checkpoint(values, versions)
    config = cfg(thread, "", parent)
    changed = {c: versions[c] for c in (values if new is None else new)}
    return saver.put(config, checkpoint, {"source": "loop", "step": 1}, changed), checkpoint


def test_only_trigger_channels_holding_none_are_inlined(
    saver: RedisSaver, prefix: str, client: redis.Redis
) -> None:
    values: dict[str, Any] = {
        "branch:to:agent": None,
        "branch:to:tools": None,
        "branch:to:odd": "a value",  # not None: a blob
        "none": None,  # not a trigger channel: may be a delta channel's seed
        "turn": 7,
        "text": BIG,
    }
    put(saver, "t", values)
    blobs = {"branch:to:odd", "none", "turn", "text"}
    assert blob_channels(client, prefix) == blobs
    (cp,) = keys_of(client, f"{prefix}:cp:*")
    assert record_of(client, cp)["ck"].startswith(INLINE_MARK)
    bv = record_of(client, cp)["bv"].decode()
    value_refs, bases = bv.split(",,")  # the refs of its values, then of bases (none here)
    assert sorted(decode_part(ref.split(":")[0]) for ref in value_refs.split(",")) == sorted(blobs)
    assert bases == ""
    loaded = saver.get_tuple(cfg("t"))
    assert loaded is not None
    assert loaded.checkpoint["channel_values"] == values


def test_a_record_without_inline_values_has_no_mark(
    saver: RedisSaver, prefix: str, client: redis.Redis
) -> None:
    put(saver, "t", {"text": BIG})
    (cp,) = keys_of(client, f"{prefix}:cp:*")
    assert not record_of(client, cp)["ck"].startswith(INLINE_MARK)
    loaded = saver.get_tuple(cfg("t"))
    assert loaded is not None and loaded.checkpoint["channel_values"] == {"text": BIG}


def test_unchanged_small_values_come_back_with_every_later_checkpoint(
    saver: RedisSaver, prefix: str, client: redis.Redis
) -> None:
    first, _ = put(saver, "t", {"turn": 1, "text": BIG, "branch:to:a": None})
    # the next checkpoint changes nothing: its values are those of the first
    second, _ = put(
        saver,
        "t",
        {"turn": 1, "text": BIG, "branch:to:a": None},
        parent=first["configurable"]["checkpoint_id"],
        new=set(),
    )
    for config in (first, second):
        loaded = saver.get_tuple(config)
        assert loaded is not None
        assert loaded.checkpoint["channel_values"] == {"turn": 1, "text": BIG, "branch:to:a": None}
    assert blob_channels(client, prefix) == {"turn", "text"}


def test_a_record_written_before_inlining_still_reads(
    saver: RedisSaver, prefix: str, client: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    values = {"turn": 3, "branch:to:a": None, "text": BIG}
    with monkeypatch.context() as m:
        m.setattr(writes, "inlinable", lambda channel, value: False)  # the layout before
        put(saver, "t", values)
    assert blob_channels(client, prefix) == {"turn", "branch:to:a", "text"}
    (cp,) = keys_of(client, f"{prefix}:cp:*")
    assert not record_of(client, cp)["ck"].startswith(INLINE_MARK)
    loaded = saver.get_tuple(cfg("t"))
    assert loaded is not None and loaded.checkpoint["channel_values"] == values


def test_an_older_reader_refuses_an_inlined_record(
    saver: RedisSaver, prefix: str, client: redis.Redis
) -> None:
    put(saver, "t", {"branch:to:a": None})
    (cp,) = keys_of(client, f"{prefix}:cp:*")
    stored = record_of(client, cp)["ck"]
    assert stored is not None
    # what a reader without INLINE_MARK did with the field: loads it as a plain stored value
    type_, _, data = stored.partition(b"\0")
    with pytest.raises(NotImplementedError, match="Unknown serialization type: i:"):
        with_compression(saver.serde, 1).loads_typed((type_.decode(), data))


def test_copies_prunes_and_keep_last_keep_inline_values(
    server_url: str, prefix: str, client: redis.Redis
) -> None:
    with RedisSaver(server_url, prefix=prefix, keep_last=2) as saver:
        config = None
        for turn in range(1, 5):
            values = {"turn": turn, "branch:to:a": None, "text": BIG + str(turn)}
            config, _ = put(
                saver,
                "t",
                values,
                version=str(turn),
                parent=config["configurable"]["checkpoint_id"] if config else None,
            )
        saver.copy_thread("t", "copy")
        saver.prune(["t"])
        for thread in ("t", "copy"):
            loaded = saver.get_tuple(cfg(thread))
            assert loaded is not None
            assert loaded.checkpoint["channel_values"] == {
                "turn": 4,
                "branch:to:a": None,
                "text": BIG + "4",
            }
        assert [t.checkpoint["channel_values"]["turn"] for t in saver.list(cfg("copy"))] == [4, 3]
        assert saver.check_invariants() == []


def test_inline_values_are_encrypted_with_the_checkpoint(
    server_url: str, prefix: str, client: redis.Redis
) -> None:
    serde = EncryptedSerializer.from_pycryptodome_aes(key=b"0123456789abcdef")
    with RedisSaver(server_url, prefix=prefix, serde=serde) as saver:
        put(saver, "t", {"branch:to:horse": None})
        (cp,) = keys_of(client, f"{prefix}:cp:*")
        stored = record_of(client, cp)["ck"]
        assert stored is not None and stored.startswith(INLINE_MARK)
        assert b"horse" not in stored
        loaded = saver.get_tuple(cfg("t"))
        assert loaded is not None
        assert loaded.checkpoint["channel_values"] == {"branch:to:horse": None}


@pytest.mark.parametrize("value", [5, None, "short", 0.5, True])
def test_a_plain_small_value_stays_a_delta_channels_seed(saver: RedisSaver, value: Any) -> None:
    """A channel that becomes a DeltaChannel after its plain values were stored (LangGraph
    supports the move) is rebuilt from the nearest stored value, whatever its type: small
    values of other channels than triggers stay blobs, which the seed lookup finds (found by
    review: inlining every small value lost this seed)."""

    def scenario(saver: Any) -> Any:
        first = make_checkpoint({"counter": value}, {"counter": "1"})
        config = saver.put(cfg("t"), first, {"source": "update", "step": 0}, {"counter": "1"})
        later = make_checkpoint({}, {"counter": "1"})  # now a DeltaChannel, not snapshotted
        metadata = {"source": "loop", "step": 1, "counters_since_delta_snapshot": {"counter": 1}}
        config = saver.put(config, later, metadata, {})
        return saver.get_delta_channel_history(config=config, channels=["counter"])

    expected = scenario(InMemorySaver())
    assert expected == {"counter": {"writes": [], "seed": value}}
    assert scenario(saver) == expected
