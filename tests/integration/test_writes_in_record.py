"""Pending writes are kept in their checkpoint's record (fields "w:<task id>:<idx>", after
ck): a key of their own costs a checkpoint about 250 bytes. Writes stored before their
checkpoint (LangGraph's async durability may store them first), written by an older version,
or too large for the record go into the writes hash (P:w) and its index, as before; reads
see both, each write once.
"""

from __future__ import annotations

import os

import redis
from langgraph.checkpoint.base import ERROR, INTERRUPT

from langgraph.checkpoint.rediskv import RedisSaver
from langgraph.checkpoint.rediskv.keys import KeySchema, pack_record

from ..conftest import data_keys, keys_of, record_of
from .test_contract import cfg, make_checkpoint

# put_writes.lua's RECORD_WRITES_MAX
RECORD_WRITES_MAX = 16384


def put_one(saver: RedisSaver, thread: str = "t", parent: str | None = None) -> str:
    checkpoint = make_checkpoint({"n": 1}, {"n": saver.get_next_version(None, None)})
    saver.put(cfg(thread, checkpoint_id=parent), checkpoint, {"step": 1}, {"n": "1"})
    return checkpoint["id"]


def write_fields(client: redis.Redis, prefix: str, checkpoint_id: str) -> dict[str, bytes]:
    (key,) = keys_of(client, f"{prefix}:cp:*:{checkpoint_id}")
    return {f: v for f, v in record_of(client, key).items() if f.startswith("w:")}


def kinds(client: redis.Redis, prefix: str) -> list[str]:
    return sorted({key.split(":")[1] for key in data_keys(client, prefix)})


def test_writes_after_their_checkpoint_go_into_its_record(
    saver: RedisSaver, prefix: str, client: redis.Redis
) -> None:
    cid = put_one(saver)
    saver.put_writes(cfg("t", checkpoint_id=cid), [("a", 1), ("b", "two")], "task-1")
    saver.put_writes(cfg("t", checkpoint_id=cid), [("a", 3)], "task-2")
    assert kinds(client, prefix) == ["blob", "cp", "dl", "idx", "th"]  # (dl: the ledger)
    assert sorted(write_fields(client, prefix, cid)) == ["w:task-1:0", "w:task-1:1", "w:task-2:0"]
    tup = saver.get_tuple(cfg("t"))
    assert tup is not None
    assert tup.pending_writes == [("task-1", "a", 1), ("task-1", "b", "two"), ("task-2", "a", 3)]
    # the record's other fields are read as before
    assert tup.checkpoint["channel_values"] == {"n": 1} and tup.metadata["step"] == 1


def test_a_regular_write_is_kept_first_a_special_one_replaced(
    saver: RedisSaver, client: redis.Redis, prefix: str
) -> None:
    cid = put_one(saver)
    config = cfg("t", checkpoint_id=cid)
    saver.put_writes(config, [("a", "first"), (ERROR, "boom")], "task")
    saver.put_writes(config, [("a", "second"), (ERROR, "boom again")], "task")
    saver.put_writes(config, [(INTERRUPT, "stop")], "task")
    tup = saver.get_tuple(cfg("t"))
    assert tup is not None
    assert tup.pending_writes == [  # (LangGraph's order: by index, the special ones < 0)
        ("task", INTERRUPT, "stop"),
        ("task", ERROR, "boom again"),
        ("task", "a", "first"),
    ]
    assert len(write_fields(client, prefix, cid)) == 3


def test_writes_before_their_checkpoint_stay_in_the_hash_with_the_later_ones(
    saver: RedisSaver, prefix: str, client: redis.Redis
) -> None:
    checkpoint = make_checkpoint({"n": 1}, {"n": saver.get_next_version(None, None)})
    config = cfg("t", checkpoint_id=checkpoint["id"])
    saver.put_writes(config, [("a", 1)], "early")
    saver.put(cfg("t"), checkpoint, {"step": 1}, {"n": "1"})
    saver.put_writes(config, [("a", 2)], "late")
    saver.put_writes(config, [("a", 9)], "early")  # first wins, across the call
    keys = KeySchema(prefix)
    tag = keys.tag("t")
    assert client.hkeys(keys.writes(tag, "", checkpoint["id"])) == [b"early:0", b"late:0"]
    assert client.smembers(keys.writes_index(tag, "")) == {checkpoint["id"].encode()}
    assert write_fields(client, prefix, checkpoint["id"]) == {}
    tup = saver.get_tuple(cfg("t"))
    assert tup is not None and tup.pending_writes == [("early", "a", 1), ("late", "a", 2)]


def test_putting_a_checkpoint_again_keeps_its_writes(
    saver: RedisSaver, prefix: str, client: redis.Redis
) -> None:
    checkpoint = make_checkpoint({"n": 1}, {"n": saver.get_next_version(None, None)})
    saver.put(cfg("t"), checkpoint, {"step": 1}, {"n": "1"})
    saver.put_writes(cfg("t", checkpoint_id=checkpoint["id"]), [("a", 1)], "task")
    saver.put(cfg("t"), checkpoint, {"step": 2}, {})
    tup = saver.get_tuple(cfg("t"))
    assert tup is not None
    assert (tup.metadata["step"], tup.pending_writes) == (2, [("task", "a", 1)])
    assert list(write_fields(client, prefix, checkpoint["id"])) == ["w:task:0"]


def test_writes_past_the_record_limit_move_to_the_hash_each_once(
    saver: RedisSaver, prefix: str, client: redis.Redis
) -> None:
    cid = put_one(saver)
    config = cfg("t", checkpoint_id=cid)
    (key,) = keys_of(client, f"{prefix}:cp:*:{cid}")
    before = client.strlen(key)
    small, large = "x" * 100, os.urandom(RECORD_WRITES_MAX)  # (random: compression keeps it large)
    saver.put_writes(config, [("a", small)], "one")
    assert client.strlen(key) > before and list(write_fields(client, prefix, cid)) == ["w:one:0"]
    saver.put_writes(config, [("a", large)], "two")
    # the record is back to its size without writes; both writes are in the hash
    assert client.strlen(key) == before and write_fields(client, prefix, cid) == {}
    keys = KeySchema(prefix)
    hash_key = keys.writes(keys.tag("t"), "", cid)
    assert sorted(client.hkeys(hash_key)) == [b"one:0", b"two:0"]
    saver.put_writes(config, [("a", "again")], "one")  # first wins in the hash too
    saver.put_writes(config, [("b", "three")], "three")
    tup = saver.get_tuple(cfg("t"))
    assert tup is not None
    assert tup.pending_writes == [("one", "a", small), ("three", "b", "three"), ("two", "a", large)]
    assert write_fields(client, prefix, cid) == {}


def test_a_store_with_writes_in_hashes_reads_and_takes_more(
    saver: RedisSaver, prefix: str, client: redis.Redis
) -> None:
    """Writes stored by the version before (a hash per checkpoint) stay where they are, and
    later writes of that checkpoint join them there."""
    cid = put_one(saver)
    keys = KeySchema(prefix)
    tag = keys.tag("t")
    saver.put_writes(cfg("t", checkpoint_id=cid), [("a", 1)], "old")
    (key,) = keys_of(client, f"{prefix}:cp:*:{cid}")
    # as the older version stored it: the write in a hash, the record without it
    fields = {f.encode(): v for f, v in record_of(client, key).items()}
    client.set(key, pack_record({f: v for f, v in fields.items() if not f.startswith(b"w:")}))
    client.hset(keys.writes(tag, "", cid), "old:0", fields[b"w:old:0"])
    client.sadd(keys.writes_index(tag, ""), cid)
    saver.put_writes(cfg("t", checkpoint_id=cid), [("a", 2)], "new")
    saver.put_writes(cfg("t", checkpoint_id=cid), [("a", 3)], "old")
    assert sorted(client.hkeys(keys.writes(tag, "", cid))) == [b"new:0", b"old:0"]
    assert write_fields(client, prefix, cid) == {}
    tup = saver.get_tuple(cfg("t"))
    assert tup is not None and tup.pending_writes == [("new", "a", 2), ("old", "a", 1)]
    saver.delete_thread("t")
    assert data_keys(client, prefix) == []
