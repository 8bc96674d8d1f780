"""Checkpoint records are one string each (lua/include/record.lua); records written before,
as hashes of the same fields, keep working with every operation.

A hash of a dozen fields, two of them longer than hash-max-listpack-value, is a hashtable in
Redis, which costs about 600 bytes more per checkpoint than the same fields in a string.
"""

from __future__ import annotations

import re
from typing import Any

import pytest
import redis

from langgraph.checkpoint.rediskv import RedisSaver
from langgraph.checkpoint.rediskv.keys import pack_fields, pack_record, parse_record

from ..conftest import keys_of, record_of
from .test_contract import cfg, make_checkpoint
from .test_reference_compression import Chat


def as_hashes(client: redis.Redis, prefix: str) -> int:
    """Rewrite every string record under the prefix as a hash of its fields, as the layout
    before wrote them (expiry kept). Returns how many."""
    count = 0
    for key in keys_of(client, f"{prefix}:cp:*"):
        if client.type(key) != b"string":
            continue
        packed = client.get(key)
        assert packed is not None
        left = client.pttl(key)
        client.delete(key)
        client.hset(key, mapping=parse_record(packed))
        if left > 0:
            client.pexpire(key, left)
        count += 1
    return count


def snapshot_of(saver: RedisSaver, thread: str) -> list[tuple[Any, ...]]:
    return [
        (t.config, t.checkpoint, t.metadata, t.parent_config, t.pending_writes)
        for t in saver.list(cfg(thread))
    ]


def test_a_record_is_one_string_smaller_than_the_hash_it_was(
    saver: RedisSaver, prefix: str, client: redis.Redis
) -> None:
    chat = Chat()
    ids = [chat.turn(saver) for _ in range(4)]
    (key,) = keys_of(client, f"{prefix}:cp:*:{ids[-1]}")
    assert client.type(key) == b"string"
    fields = record_of(client, key)
    assert {"ck", "md", "bv", "p", "r"} <= set(fields)
    as_string = client.memory_usage(key, samples=0)
    as_hashes(client, prefix)
    assert client.type(key) == b"hash" and record_of(client, key) == fields
    as_hash = client.memory_usage(key, samples=0)
    assert as_string is not None and as_hash is not None and as_string < as_hash


def test_records_written_as_hashes_keep_working(
    server_url: str, prefix: str, client: redis.Redis
) -> None:
    with RedisSaver(server_url, prefix=prefix, index_metadata=("run_id", "source")) as saver:
        chat = Chat()
        for run in ("run-a", "run-a", "run-b", "run-b", "run-c"):
            chat.turn(saver, run)
        saver.put_writes(cfg("t", "", chat.put[-1][0]), [("messages", "late")], "task-1")
        other = Chat("other")
        for _ in range(3):
            other.turn(saver)
        before = snapshot_of(saver, "t")
        filtered = [t.checkpoint["id"] for t in saver.list(None, filter={"run_id": "run-b"})]
        assert as_hashes(client, prefix) == 8

        # reads: get, list, the indexed and the scanned filter, the delta walk
        assert snapshot_of(saver, "t") == before
        chat.check(saver)
        assert [t.checkpoint["id"] for t in saver.list(None, filter={"run_id": "run-b"})] == (
            filtered
        )
        assert len(list(saver.list(cfg("t"), filter={"step": 3}))) == 1
        assert saver.get_delta_channel_history(config=cfg("t"), channels=["messages"])
        assert saver.check_invariants() == []

        # writes next to them: a child (a string record), a reindex, a copy, delete_for_runs
        chat.turn(saver, "run-d")
        (key,) = keys_of(client, f"{prefix}:cp:*:{chat.put[-1][0]}")
        assert client.type(key) == b"string"
        with RedisSaver(
            server_url, prefix=prefix, index_metadata=("run_id", "source", "step")
        ) as more:
            more.put_writes(cfg("t", "", chat.put[-1][0]), [("messages", "x")], "task-2")
            assert more.reindex_metadata() > 0  # records of both layouts get their ix
            assert len(list(more.list(None, filter={"step": 2}))) == 2  # t and other
        saver.copy_thread("t", "copy")
        assert [t.checkpoint["id"] for t in saver.list(cfg("copy"))] == [
            t.checkpoint["id"] for t in saver.list(cfg("t"))
        ]
        saver.delete_for_runs(["run-a"])
        assert len(list(saver.list(cfg("t")))) == 4
        chat.check(saver, [checkpoint_id for checkpoint_id, _ in chat.put[2:]])
        assert saver.check_invariants() == []

    # trims and prunes over hash records
    with RedisSaver(server_url, prefix=prefix, keep_last=2) as trimming:
        other.turn(trimming)
        other.turn(trimming)
        assert len(list(trimming.list(cfg("other")))) == 2
        other.check(trimming, [checkpoint_id for checkpoint_id, _ in other.put[-2:]])
        trimming.prune(["copy"])
        assert len(list(trimming.list(cfg("copy")))) == 1
        trimming.delete_thread("t")
        assert keys_of(client, f"{prefix}:*{{t}}*") == []
        assert trimming.check_invariants() == []


def test_metadata_keys_with_any_bytes_stay_their_own_fields(
    saver: RedisSaver, prefix: str, client: redis.Redis
) -> None:
    """Found by review: names were cut at the first NUL, so a metadata key with a NUL broke
    the thread for every operation, and a crafted one forged fields (a hidden flag, the
    parent). Names are length-prefixed now."""
    forged = {"a\x00b": 1, "z\x000\x00h": 1, "z\x000\x00p": "x", "3:4:": "y", "": "empty"}
    chat = Chat()
    first = chat.turn(saver)
    checkpoint = make_checkpoint({"messages": chat.messages}, {"messages": "00000001"})
    config = saver.put(cfg("t", "", first), checkpoint, {"source": "loop", **forged}, {})
    got = saver.get_tuple(config)
    assert got is not None and got.parent_config == cfg("t", "", first)
    assert {k: got.metadata[k] for k in forged} == forged  # type: ignore[literal-required]
    for key, value in forged.items():
        assert [t.checkpoint["id"] for t in saver.list(cfg("t"), filter={key: value})] == [
            checkpoint["id"]
        ]
    assert len(list(saver.list(None, filter={"z\x000\x00h": 1}))) == 1
    saver.copy_thread("t", "copy")
    assert saver.get_tuple(cfg("copy")) is not None
    assert saver.check_invariants() == []
    saver.delete_thread("t")
    assert keys_of(client, f"{prefix}:*{{t}}*") == []


def test_a_corrupt_record_is_an_error_that_names_it(
    saver: RedisSaver, prefix: str, client: redis.Redis
) -> None:
    chat = Chat()
    only = chat.turn(saver)
    (key,) = keys_of(client, f"{prefix}:cp:*:{only}")
    packed = client.get(key)
    assert packed is not None
    client.set(key, packed[:-10])  # by hand: the end of the checkpoint cut off
    with pytest.raises(ValueError, match=f"corrupt checkpoint record {re.escape(key)}: corrupt"):
        saver.get_tuple(cfg("t"))
    client.set(key, b"2:9999:bv" + packed)  # a small field that claims more than there is
    with pytest.raises(ValueError, match=f"corrupt checkpoint record {re.escape(key)}: corrupt"):
        saver.get_tuple(cfg("t"))
    # a negative length after ck (int() takes a sign: the client's parse went round forever)
    client.set(key, packed + b"1:-6:x")
    with pytest.raises(ValueError, match=f"corrupt checkpoint record {re.escape(key)}: corrupt"):
        saver.get_tuple(cfg("t"))
    with pytest.raises(ValueError, match=f"corrupt checkpoint record {re.escape(key)}: corrupt"):
        list(saver.list(cfg("t")))
    # md followed by a header that is not one: an error, not a checkpoint without ck (which
    # get_tuple would hide, giving the thread's previous checkpoint, or none)
    fields = parse_record(packed)
    small = [(name, value) for name, value in fields.items() if name not in (b"md", b"ck")]
    client.set(key, pack_fields([*small, (b"md", fields[b"md"])]) + b"2:x:ck" + fields[b"ck"])
    with pytest.raises(ValueError, match=f"corrupt checkpoint record {re.escape(key)}: corrupt"):
        saver.get_tuple(cfg("t"))
    client.set(key, packed)
    assert saver.get_tuple(cfg("t")).checkpoint["id"] == only  # type: ignore[union-attr]


@pytest.mark.parametrize("operation", ["prune", "delete_for_runs"])
def test_a_record_whose_head_ends_where_a_field_ends_is_read_whole(
    saver: RedisSaver, prefix: str, client: redis.Redis, operation: str
) -> None:
    """A reader of small fields takes the record's first 1 KB; when that ends exactly where a
    field ends, it reads on. (It took the head for the whole record: a prune or
    delete_for_runs missed the blob refs of a kept checkpoint behind it, and deleted the
    blob the kept checkpoint shares with the removed one. Records with many metadata keys,
    as the Agent Server writes, reach past 1 KB.)"""
    version = saver.get_next_version(None, None)
    first = make_checkpoint({"n": "shared"}, {"n": version})
    saver.put(cfg("t"), first, {"step": 0, "run_id": "old"}, {"n": version})
    kept = make_checkpoint({"n": "shared"}, {"n": version})  # the same blob
    saver.put(cfg("t", checkpoint_id=first["id"]), kept, {"step": 1, "run_id": "new"}, {})
    (key,) = keys_of(client, f"{prefix}:cp:*:{kept['id']}")
    fields = {name.encode(): value for name, value in record_of(client, key).items()}
    # a first field that ends at byte 1024, then the others (bv, p, ...), the large ones last
    header = len(b"5:0000:m:pad")
    pad = b'"' + b"x" * (1024 - header - 2) + b'"'
    packed = b"5:%d:m:pad%s" % (len(pad), pad) + pack_record(fields)
    assert len(b"5:%d:m:pad%s" % (len(pad), pad)) == 1024
    client.set(key, packed)
    if operation == "prune":
        saver.prune(["t"], strategy="keep_latest")
    else:
        saver.delete_for_runs(["old"])
    tup = saver.get_tuple(cfg("t"))
    assert tup is not None and tup.checkpoint["id"] == kept["id"]
    assert tup.checkpoint["channel_values"] == {"n": "shared"}
    assert [t.checkpoint["id"] for t in saver.list(cfg("t"))] == [kept["id"]]
