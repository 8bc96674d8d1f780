"""A checkpoint record the scripts cannot parse (random bytes, a record cut short, one of the
first string layout some earlier commits wrote) never blocks deletion or diagnosis.

delete_thread removes every key of the thread, the unreadable records too (it finds a
checkpoint by its key names, and the blobs only such a record referenced by the thread's blob
key pattern), and the id is usable again. prune and delete_for_runs leave an unreadable
checkpoint in place (removing it would leave the blobs only it references, and its index
entries, where nothing finds them again) and finish their job; so does the trim of a put with
keep_last, and the put is stored. copy_thread refuses with an error that names the record,
leaving the source untouched and the target as it was. get_tuple and list name the record.
check_invariants and ``rediskv doctor`` report "unreadable record <key>".
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from typing import Any

import pytest
import redis
from langgraph.checkpoint.base import empty_checkpoint
from redis.cluster import RedisCluster

from langgraph.checkpoint.rediskv import RedisSaver
from langgraph.checkpoint.rediskv.keys import KeySchema, parse_record

from ..conftest import LocalCluster, data_keys, keys_of, new_prefix, record_of, snapshot
from ..e2e.test_cli import Cli
from ..integration.test_contract import cfg
from ..integration.test_reference_compression import Chat


def as_first_layout(packed: bytes) -> bytes:
    """A record in the first string layout (3d03704): each field as
    ``<name> NUL <length> NUL <value>``."""
    return b"".join(
        name + b"\0" + str(len(value)).encode() + b"\0" + value
        for name, value in parse_record(packed).items()
    )


def noise(packed: bytes) -> bytes:
    return b"x" + os.urandom(len(packed))  # ("x": random bytes may start as a field header)


def truncated(packed: bytes) -> bytes:
    """Cut in its last field (ck): the small fields the scripts read are whole, so deletes
    and prunes remove it as any other; the client's parse and the checker's fail."""
    return packed[: len(packed) - 7]


# how a record is made unreadable: (its name, the new bytes from the old)
CORRUPTIONS: list[tuple[str, Callable[[bytes], bytes]]] = [
    ("random", noise),
    ("truncated", truncated),
    ("first layout", as_first_layout),
]


@pytest.fixture(params=[c[1] for c in CORRUPTIONS], ids=[c[0] for c in CORRUPTIONS])
def corrupt(request: pytest.FixtureRequest) -> Callable[[bytes], bytes]:
    return request.param  # type: ignore[no-any-return]


def spoil(client: redis.Redis, key: str, corrupt: Callable[[bytes], bytes]) -> None:
    packed = client.get(key)
    assert isinstance(packed, bytes)
    client.set(key, corrupt(packed), keepttl=True)


def checkpoint_key(prefix: str, thread: str, checkpoint_id: str, ns: str = "") -> str:
    return KeySchema(prefix).checkpoint(KeySchema.tag(thread), ns, checkpoint_id)


def thread_keys(client: redis.Redis, prefix: str, thread: str) -> list[str]:
    tag = KeySchema.tag(thread)
    return [k for k in data_keys(client, prefix) if tag in k and ":mi:" not in k]


def chat_with_unreadable(
    saver: RedisSaver,
    client: redis.Redis,
    prefix: str,
    corrupt: Callable[[bytes], bytes],
    thread: str = "t",
    turns: int = 5,
    spoiled: int = 2,
) -> tuple[Chat, str]:
    """A chat of `turns` checkpoints over two runs, whose checkpoint `spoiled` (0-based) is
    made unreadable; returns the chat and the record's key."""
    chat = Chat(thread)
    for turn in range(turns):
        chat.turn(saver, "run-a" if turn < 3 else "run-b")
    key = checkpoint_key(prefix, thread, chat.put[spoiled][0])
    spoil(client, key, corrupt)
    return chat, key


def problems_of_unreadable(client: redis.Redis, prefix: str, key: str, turn: int) -> list[Any]:
    """What check_invariants reports for the unreadable record `key` of a chat's turn: the
    record, and its blobs (the turn's new values), which no record that can be read lists:
    only the unreadable one may, so they are not orphans for doctor --repair to remove."""
    blobs = keys_of(client, f"{prefix}:blob:*:{turn:08d}")
    assert len(blobs) == 2  # (messages, turn)
    return sorted(
        [("unreadable record", key, False)]
        + [("blob that only an unreadable record may reference", blob, False) for blob in blobs],
        key=lambda p: (p[1], p[0]),
    )


def test_delete_thread_removes_a_thread_with_an_unreadable_record(
    saver: RedisSaver, client: redis.Redis, prefix: str, corrupt: Callable[[bytes], bytes]
) -> None:
    other = Chat("other")
    other.turn(saver)
    others = snapshot(client, f"{prefix}:*{KeySchema.tag('other')}*")
    chat_with_unreadable(saver, client, prefix, corrupt)
    saver.delete_thread("t")
    assert thread_keys(client, prefix, "t") == []
    assert snapshot(client, f"{prefix}:*{KeySchema.tag('other')}*") == others
    # the id is usable again
    again = Chat("t")
    ids = [again.turn(saver) for _ in range(2)]
    again.check(saver)
    assert [t.checkpoint["id"] for t in saver.list(cfg("t"))] == ids[::-1]
    assert saver.check_invariants() == []


def test_a_blob_only_an_unreadable_record_references_goes_with_the_thread(
    saver: RedisSaver, client: redis.Redis, prefix: str
) -> None:
    chat_with_unreadable(saver, client, prefix, noise, spoiled=4)
    # the latest checkpoint's new messages blob is referenced by its record only
    assert keys_of(client, f"{prefix}:blob:*:messages:00000005") != []
    saver.delete_thread("t")
    assert data_keys(client, prefix) == [f"{prefix}:mi:run_id:%22run-b%22"]
    # an entry of a global metadata index the record had (its ix unread) stays, as for an
    # expired checkpoint: readers skip it, and puts sweep it
    assert list(saver.list(None, filter={"run_id": "run-b"})) == []
    assert saver.check_invariants() == []


def test_reads_of_an_unreadable_record_name_it(
    saver: RedisSaver, client: redis.Redis, prefix: str, corrupt: Callable[[bytes], bytes]
) -> None:
    chat, key = chat_with_unreadable(saver, client, prefix, corrupt)
    spoiled = chat.put[2][0]
    named = f"corrupt checkpoint record {key}: corrupt checkpoint record at byte "
    with pytest.raises(ValueError, match=f"^{re.escape(named)}"):
        saver.get_tuple(cfg("t", "", spoiled))
    with pytest.raises(ValueError, match=f"^{re.escape(named)}"):
        list(saver.list(cfg("t")))
    with pytest.raises(ValueError, match=f"^{re.escape(named)}"):
        list(saver.list(cfg("t"), filter={"source": "loop"}))
    with pytest.raises(ValueError, match=f"^{re.escape(named)}"):
        list(saver.list(None, filter={"run_id": "run-a"}))
    # the others read as they were
    chat.check(saver, [i for i, _ in chat.put if i != spoiled])
    assert [t.checkpoint["id"] for t in saver.list(cfg("t"), limit=2)] == [
        chat.put[4][0],
        chat.put[3][0],
    ]


def test_check_invariants_reports_an_unreadable_record(
    saver: RedisSaver, client: redis.Redis, prefix: str, corrupt: Callable[[bytes], bytes]
) -> None:
    _, key = chat_with_unreadable(saver, client, prefix, corrupt, spoiled=4)
    problems = saver.check_invariants()
    assert [(p.problem, p.key, p.stale) for p in problems] == problems_of_unreadable(
        client, prefix, key, 5
    )


def test_doctor_reports_an_unreadable_record(
    server_url: str, client: redis.Redis, prefix: str
) -> None:
    with RedisSaver(server_url, prefix=prefix) as saver:
        _, key = chat_with_unreadable(saver, client, prefix, noise)
    result = Cli(server_url, prefix).run("doctor")
    assert result.returncode == 2, result.stderr
    assert result.stderr == ""
    lines = result.stdout.splitlines()
    assert f"  unreadable record: {key}" in lines
    assert lines[-1] == "doctor found problems (exit code 2)"


def test_prune_leaves_an_unreadable_checkpoint_and_prunes_the_rest(
    saver: RedisSaver, client: redis.Redis, prefix: str, corrupt: Callable[[bytes], bytes]
) -> None:
    chat, key = chat_with_unreadable(saver, client, prefix, corrupt)
    saver.prune(["t"])
    index = KeySchema(prefix).index(KeySchema.tag("t"), "")
    assert keys_of(client, f"{prefix}:gc:*") == []
    chat.check(saver, [chat.put[4][0]])
    assert saver.get_tuple(cfg("t", "", chat.put[3][0])) is None
    problems = [(p.problem, p.key, p.stale) for p in saver.check_invariants()]
    if corrupt is truncated:  # the fields prune reads are whole: it goes as any other
        assert client.zrange(index, 0, -1) == [chat.put[4][0].encode()]
        assert problems == []
    else:
        assert client.zrange(index, 0, -1) == [chat.put[2][0].encode(), chat.put[4][0].encode()]
        assert problems == problems_of_unreadable(client, prefix, key, 3)
    saver.delete_thread("t")
    assert thread_keys(client, prefix, "t") == []


def test_prune_keeps_the_latest_readable_checkpoint_under_an_unreadable_one(
    saver: RedisSaver, client: redis.Redis, prefix: str
) -> None:
    chat, _ = chat_with_unreadable(saver, client, prefix, lambda p: b"x" + p, spoiled=4)
    saver.prune(["t"])
    index = KeySchema(prefix).index(KeySchema.tag("t"), "")
    assert client.zrange(index, 0, -1) == [chat.put[3][0].encode(), chat.put[4][0].encode()]
    chat.check(saver, [chat.put[3][0]])
    assert keys_of(client, f"{prefix}:gc:*") == []


def test_delete_for_runs_leaves_an_unreadable_checkpoint_and_deletes_the_rest(
    saver: RedisSaver, client: redis.Redis, prefix: str, corrupt: Callable[[bytes], bytes]
) -> None:
    chat, key = chat_with_unreadable(saver, client, prefix, corrupt)
    saver.delete_for_runs(["run-a"])
    index = KeySchema(prefix).index(KeySchema.tag("t"), "")
    assert keys_of(client, f"{prefix}:gc:*") == []
    chat.check(saver, [chat.put[3][0], chat.put[4][0]])
    assert saver.get_tuple(cfg("t", "", chat.put[0][0])) is None
    problems = [(p.problem, p.key, p.stale) for p in saver.check_invariants()]
    if corrupt is truncated:  # the fields it reads are whole: it goes as any other
        assert client.zrange(index, 0, -1) == [i.encode() for i, _ in chat.put[3:]]
        assert problems == []
    else:
        assert client.zrange(index, 0, -1) == [i.encode() for i, _ in chat.put[2:]]
        assert problems == problems_of_unreadable(client, prefix, key, 3)
    saver.delete_thread("t")
    assert thread_keys(client, prefix, "t") == []


def test_copy_thread_refuses_a_source_with_an_unreadable_record(
    saver: RedisSaver, client: redis.Redis, prefix: str, corrupt: Callable[[bytes], bytes]
) -> None:
    _, key = chat_with_unreadable(saver, client, prefix, corrupt)
    target = Chat("target")
    target.turn(saver)
    before = snapshot(client, f"{prefix}:*")
    for target_id in ("target", "new"):  # onto a thread that exists, and a new one
        refused = f"^copy of 't' to '{target_id}' refused: unreadable record {re.escape(key)} "
        with pytest.raises(ValueError, match=refused):
            saver.copy_thread("t", target_id)
        assert snapshot(client, f"{prefix}:*") == before


def test_delete_thread_on_a_cluster_finds_the_blobs_by_pattern(local_cluster: LocalCluster) -> None:
    """The blob fallback's SCAN runs on the node of the thread's slot: it sees the keys of
    that node's other slots too, and unlinks only the thread's (the pattern has its tag)."""
    prefix = new_prefix()
    client = RedisCluster.from_url(local_cluster.url)
    try:
        with RedisSaver(local_cluster.url, prefix=prefix, cluster=True) as saver:
            other = Chat("other")
            other.turn(saver)
            chat_with_unreadable(saver, client, prefix, noise, spoiled=4)  # type: ignore[arg-type]
            saver.delete_thread("t")
            keys = sorted(k.decode() for k in client.scan_iter(match=f"{prefix}:*"))
            assert [k for k in keys if "{t}" in k] == []
            assert any("{other}" in k for k in keys)
            assert saver.check_invariants() == []
            Chat("t").turn(saver)
            assert saver.get_tuple(cfg("t")) is not None
    finally:
        for key in client.scan_iter(match=f"{prefix}:*"):
            client.unlink(key)
        client.close()


def test_a_thread_an_earlier_delete_left_hidden_is_reaped_and_usable(
    saver: RedisSaver, client: redis.Redis, prefix: str
) -> None:
    """What a delete_thread of an earlier version left when it met an unreadable record: the
    root and runs renamed into job del:1 of the gc root, every other key in place. The next
    put of the id reaps that job (the record without reading it) and is stored."""
    chat_with_unreadable(saver, client, prefix, noise)
    schema, tag = KeySchema(prefix), KeySchema.tag("t")
    client.sadd(schema.gc(tag), "del:1")
    client.rename(schema.thread(tag), f"{schema.gc(tag)}:1:th")
    client.rename(schema.runs(tag), f"{schema.gc(tag)}:1:runs")
    assert saver.get_tuple(cfg("t")) is None  # hidden
    again = Chat("t")
    again.turn(saver)
    again.check(saver)
    assert [t.checkpoint["id"] for t in saver.list(cfg("t"))] == [again.put[0][0]]
    assert keys_of(client, f"{prefix}:gc:*") == []
    assert saver.check_invariants() == []


def test_set_thread_ttl_finishes_over_an_unreadable_record(
    saver: RedisSaver, client: redis.Redis, prefix: str
) -> None:
    """The ttl job gives the record its expiry without reading it, and leaves no job behind
    (one left would make every later write of the thread wait for it)."""
    chat, key = chat_with_unreadable(saver, client, prefix, noise)
    saver.set_thread_ttl("t", 2)  # minutes
    assert keys_of(client, f"{prefix}:gc:*") == []
    assert 0 < client.ttl(key) <= 120
    latest = KeySchema(prefix).checkpoint(KeySchema.tag("t"), "", chat.put[4][0])
    assert 0 < client.ttl(latest) <= 120
    chat.turn(saver)
    chat.check(saver, [chat.put[5][0]])


@pytest.mark.parametrize("keep", [2, 3])
@pytest.mark.parametrize("spoiled", ["oldest kept", "latest"])
def test_keep_last_puts_go_on_over_an_unreadable_record(
    server_url: str,
    client: redis.Redis,
    prefix: str,
    corrupt: Callable[[bytes], bytes],
    keep: int,
    spoiled: str,
) -> None:
    """A saver with keep_last trims on every put: it raised at an unreadable record among the
    checkpoints it keeps (or the one leaving the window), so every later put of the thread
    failed. The unreadable checkpoint now needs nothing older kept, and once out of the window
    it stays, as prune leaves it (its blobs and index entries are unknown); a delete removes
    it."""
    with RedisSaver(server_url, prefix=prefix, keep_last=keep) as saver:
        chat = Chat("t")
        for _ in range(5):
            chat.turn(saver)
        turn = 5 - keep + 1 if spoiled == "oldest kept" else 5  # (1-based)
        key = checkpoint_key(prefix, "t", chat.put[turn - 1][0])
        spoil(client, key, corrupt)
        for _ in range(4):
            chat.turn(saver)
        kept = [i for i, _ in chat.put[-keep:]]
        index = KeySchema(prefix).index(KeySchema.tag("t"), "")
        left = [] if corrupt is truncated else [chat.put[turn - 1][0]]
        # (truncated: the small fields a trim reads are whole, so it goes as any other)
        assert client.zrange(index, 0, -1) == [i.encode() for i in left + kept]
        chat.check(saver, kept)
        assert [t.checkpoint["id"] for t in saver.list(cfg("t"), limit=keep)] == kept[::-1]
        if corrupt is not truncated:  # the whole history names it, as after a prune
            with pytest.raises(ValueError, match=f"^corrupt checkpoint record {re.escape(key)}: "):
                list(saver.list(cfg("t")))
        assert keys_of(client, f"{prefix}:gc:*") == []
        problems = [(p.problem, p.key, p.stale) for p in saver.check_invariants()]
        if corrupt is truncated:
            assert problems == []
        else:  # (the turn's blobs are listed by the unreadable record only)
            assert problems == problems_of_unreadable(client, prefix, key, turn)
        saver.delete_thread("t")
        assert thread_keys(client, prefix, "t") == []


@pytest.mark.parametrize("spoiled", ["parent", "leaving"])
def test_keep_last_puts_of_delta_channels_go_on_over_an_unreadable_record(
    server_url: str,
    client: redis.Redis,
    prefix: str,
    corrupt: Callable[[bytes], bytes],
    spoiled: str,
) -> None:
    """A hand-written delta channel "d" under keep_last=2: cp-0 and cp-5 store its value, the
    others rebuild it (their metadata counters_since_delta_snapshot lists it) from their
    ancestors, which the trim keeps (hidden once out of the window). The put read the "df"
    seeds of its parent, and hid the checkpoint leaving the window: both raised at a record
    they could not read. Past an unreadable parent nothing rebuilds the channel, so the put
    keeps nothing older for it; an unreadable checkpoint leaving the window is not hidden
    (reads name it)."""
    ids = [f"cp-{i}" for i in range(7)]

    def put(saver: RedisSaver, i: int) -> None:
        checkpoint = empty_checkpoint()
        checkpoint["id"] = ids[i]
        checkpoint["channel_versions"] = {"d": f"{i}.d"}
        stored = {"d": f"s{i}"} if i in (0, 5) else {}
        checkpoint["channel_values"] = dict(stored)
        counters = {} if stored else {"d": i}
        config = saver.put(
            cfg("t", "", ids[i - 1] if i else None),
            checkpoint,
            {"step": i, "counters_since_delta_snapshot": counters},
            {c: f"{i}.d" for c in stored},
        )
        saver.put_writes(config, [("d", f"w{i}")], f"task-{i}")

    with RedisSaver(server_url, prefix=prefix, keep_last=2) as saver:
        for i in range(4):
            put(saver, i)
        index = KeySchema(prefix).index(KeySchema.tag("t"), "")
        assert client.zrange(index, 0, -1) == [i.encode() for i in ids[:4]]  # (cp-0: the seed)
        at = 3 if spoiled == "parent" else 2  # (cp-2 leaves the window at the next put)
        key = checkpoint_key(prefix, "t", ids[at])
        spoil(client, key, corrupt)
        for i in range(4, 7):
            put(saver, i)
        left = [] if corrupt is truncated else [ids[at]]
        assert client.zrange(index, 0, -1) == [i.encode() for i in left + ids[5:]]
        latest = saver.get_tuple(cfg("t"))
        assert latest is not None
        assert (latest.checkpoint["id"], latest.checkpoint["channel_values"]) == (ids[6], {})
        assert latest.pending_writes == [("task-6", "d", "w6")]
        seed = saver.get_tuple(cfg("t", "", ids[5]))
        assert seed is not None
        assert seed.checkpoint["channel_values"] == {"d": "s5"}
        assert saver.get_delta_channel_history(config=cfg("t"), channels=["d"]) == {
            "d": {"seed": "s5", "writes": [("task-5", "d", "w5")]}
        }
        problems = [(p.problem, p.key, p.stale) for p in saver.check_invariants()]
        assert problems == ([] if corrupt is truncated else [("unreadable record", key, False)])
        saver.delete_thread("t")
        assert thread_keys(client, prefix, "t") == []


def test_keep_last_put_over_a_parent_cut_in_its_writes(
    server_url: str, client: redis.Redis, prefix: str
) -> None:
    """A delta channel the parent neither stores nor inherits a seed for: the put reads the
    parent's writes to find where it starts, and raised when the record was cut in them. The
    parent is then taken as the seed (kept while the child is)."""
    with RedisSaver(server_url, prefix=prefix, keep_last=2) as saver:
        parent = empty_checkpoint()
        parent["id"] = "cp-0"
        config = saver.put(cfg("t"), parent, {"counters_since_delta_snapshot": {}}, {})
        saver.put_writes(config, [("d", "w0")], "task-0")
        spoil(client, checkpoint_key(prefix, "t", "cp-0"), truncated)
        child = empty_checkpoint()
        child["id"] = "cp-1"
        saver.put(cfg("t", "", "cp-0"), child, {"counters_since_delta_snapshot": {"d": 1}}, {})
        assert record_of(client, checkpoint_key(prefix, "t", "cp-1"))["df"] == b"d=cp-0"
        got = saver.get_tuple(cfg("t"))
        assert got is not None and got.checkpoint["id"] == "cp-1"
        saver.delete_thread("t")
        assert thread_keys(client, prefix, "t") == []


def test_keep_last_trims_past_more_unreadable_records_than_a_step(
    server_url: str, saver: RedisSaver, client: redis.Redis, prefix: str
) -> None:
    """Unreadable checkpoints stay where they are, the oldest of the namespace: a put looked at
    its oldest 8 (TRIM_STEP) only, so with 8 or more of them it trimmed nothing again and the
    history grew with every put. A put now passes up to 64 of them (TRIM_EXAMINED)."""
    chat = Chat("t")
    for _ in range(12):
        chat.turn(saver)  # (without keep_last)
    keys = [checkpoint_key(prefix, "t", i) for i, _ in chat.put[:10]]
    for key in keys:
        spoil(client, key, noise)
    with RedisSaver(server_url, prefix=prefix, keep_last=2) as trimming:
        for _ in range(3):
            chat.turn(trimming)
        kept = [i for i, _ in chat.put[-2:]]
        index = KeySchema(prefix).index(KeySchema.tag("t"), "")
        assert client.zrange(index, 0, -1) == [i.encode() for i, _ in chat.put[:10]] + [
            i.encode() for i in kept
        ]
        chat.check(trimming, kept)
        assert keys_of(client, f"{prefix}:lb:*") == []
        # the blobs of the unreadable ones stay (their refs are unknown), but for one they
        # shared with checkpoints trimmed since: messages:00000008, a base turns 11 and 12 listed
        unlisted = sorted(f"{c}:{t:08d}" for t in range(1, 11) for c in ("messages", "turn"))
        unlisted.remove("messages:00000008")
        blobs = {b.split("::", 1)[1]: b for b in keys_of(client, f"{prefix}:blob:*")}
        assert sorted(blobs) == sorted(
            [
                *unlisted,
                "messages:00000013",
                "messages:00000014",
                "messages:00000015",
                "turn:00000014",
                "turn:00000015",
            ]
        )
        expected = [("unreadable record", key, False) for key in keys] + [
            ("blob that only an unreadable record may reference", blobs[ref], False)
            for ref in unlisted
        ]
        problems = [(p.problem, p.key, p.stale) for p in trimming.check_invariants()]
        assert problems == sorted(expected, key=lambda p: (p[1], p[0]))
        trimming.delete_thread("t")
        assert thread_keys(client, prefix, "t") == []


@pytest.mark.parametrize("spoiled", [noise, truncated], ids=["random", "truncated"])
def test_doctor_repair_leaves_the_blobs_of_an_unreadable_record(
    server_url: str, client: redis.Redis, prefix: str, spoiled: Callable[[bytes], bytes]
) -> None:
    """doctor --repair removed a blob only an unreadable record referenced, as a key no index
    led to: the record may be of a layout another release reads (and cut short, its bv is
    whole), so it must keep its values, as prune and keep_last leave them."""
    checkpoint = empty_checkpoint()
    checkpoint["channel_values"] = {"big": os.urandom(5000)}  # stored as a blob
    checkpoint["channel_versions"] = {"big": 1}
    with RedisSaver(server_url, prefix=prefix) as saver:
        saver.put(cfg("t"), checkpoint, {}, {"big": 1})
    key = checkpoint_key(prefix, "t", checkpoint["id"])
    blob = KeySchema(prefix).blob(KeySchema.tag("t"), "", "big", 1)
    assert client.exists(blob) == 1
    spoil(client, key, spoiled)
    before = snapshot(client, f"{prefix}:*")
    result = Cli(server_url, prefix).run("doctor", "--repair")
    assert result.returncode == 2, result.stderr
    assert result.stderr == ""
    lines = result.stdout.splitlines()
    assert not any("repair" in line for line in lines[:-3])
    assert lines[-3:] == [
        f"  blob that only an unreadable record may reference: {blob}",
        f"  unreadable record: {key}",
        "doctor found problems (exit code 2)",
    ]
    assert snapshot(client, f"{prefix}:*") == before
    with RedisSaver(server_url, prefix=prefix) as saver:
        saver.delete_thread("t")
    assert thread_keys(client, prefix, "t") == []
