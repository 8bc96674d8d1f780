"""Reference compression: a channel value stored compressed against an earlier value of its
channel (its base), whose serialized bytes are the zstd dictionary.

A chat's ``messages`` grows by a message or two per version, so after its first version a
value takes a few hundred bytes instead of kilobytes. What must hold: every checkpoint reads
back exactly; every record that references a value also lists its base (so prunes, trims,
expiry and copies keep the base as long as the value); a base that is gone makes the put send
the value in full; a stored value never takes another base; a cold saver (a restart) warms
up from get_tuple; encryption, delta-channel seeds and compression=False work as before.
The lifecycle under every operation, ttl and restart is the model test's (its messages and
summary values are stored against bases).
"""

from __future__ import annotations

import gc
import json
import os
import re
import secrets
import threading
import weakref
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import redis
import zstandard
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.serde.encrypted import EncryptedSerializer

from langgraph.checkpoint.rediskv import RedisSaver
from langgraph.checkpoint.rediskv.compression import (
    REF_COMPRESSORS_KEPT,
    REF_MARK,
    Base,
    BaseCache,
    CompressionDictionaries,
    RefCompressors,
    reference_parameters,
)

from ..clock import advance_time
from ..conftest import PrivateServer, RoundTrips, keys_of, record_of, without_base_mark
from ..prose import PROSE
from .test_contract import cfg, make_checkpoint


def message(n: int) -> Any:
    """Message n of a chat: the first one long (so that the first version of ``messages`` is
    over REF_MIN_SIZE, a base), the others of a chat's usual length."""
    text = f"{n}: {PROSE[(n * 211) % 20000 :][: 1200 if n == 1 else 300]}"
    return HumanMessage(text, id=f"m{n}") if n % 2 else AIMessage(text, id=f"m{n}")


class Chat:
    """A thread whose ``messages`` grows by one message a checkpoint, put through a saver."""

    def __init__(self, thread: str = "t") -> None:
        self.thread = thread
        self.messages: list[Any] = []
        self.parent: str | None = None
        self.version = 0
        self.put: list[tuple[str, list[Any]]] = []  # (checkpoint id, messages)

    def turn(self, saver: RedisSaver, run: str = "run-1") -> str:
        self.version += 1
        self.messages = [*self.messages, message(self.version)]
        version = f"{self.version:08d}"
        checkpoint = make_checkpoint(
            {"messages": self.messages, "turn": self.version},
            {"messages": version, "turn": version},
        )
        config = saver.put(
            cfg(self.thread, "", self.parent),
            checkpoint,
            {"source": "loop", "step": self.version, "run_id": run},
            {"messages": version, "turn": version},
        )
        self.parent = config["configurable"]["checkpoint_id"]
        self.put.append((checkpoint["id"], list(self.messages)))
        return checkpoint["id"]

    def check(self, saver: RedisSaver, ids: list[str] | None = None) -> None:
        for checkpoint_id, messages in self.put:
            if ids is None or checkpoint_id in ids:
                got = saver.get_tuple(cfg(self.thread, "", checkpoint_id))
                assert got is not None, checkpoint_id
                assert got.checkpoint["channel_values"]["messages"] == messages


def message_blobs(client: redis.Redis, prefix: str) -> dict[str, bytes]:
    """version -> stored value of each messages blob."""
    out = {}
    for key in keys_of(client, f"{prefix}:blob:*:messages:*"):
        value = client.get(key)
        assert value is not None
        out[key.rsplit(":", 1)[1]] = value
    return out


def record_refs(client: redis.Redis, prefix: str, checkpoint_id: str) -> list[list[str]]:
    """A record's bv, "values,,bases": [refs of its values, refs of bases]."""
    (key,) = keys_of(client, f"{prefix}:cp:*:{checkpoint_id}")
    values, bases = record_of(client, key)["bv"].decode().split(",,")
    return [values.split(","), bases.split(",") if bases else []]


def test_a_growing_chat_is_stored_against_bases_and_reads_back(
    saver: RedisSaver, prefix: str, client: redis.Redis
) -> None:
    chat = Chat()
    ids = [chat.turn(saver) for _ in range(12)]
    blobs = message_blobs(client, prefix)
    referenced = {v for v, stored in blobs.items() if stored.startswith(REF_MARK.encode())}
    # the first version is a base; a later one is stored against the latest base while it
    # comes to at most half of the base's stored size, else it is the next base
    assert "00000001" not in referenced and "00000002" in referenced
    assert blobs["00000002"].startswith(b"zr:messages:00000001;msgpack\0")
    assert len(referenced) >= 6
    full = {v: stored for v, stored in blobs.items() if v not in referenced}
    for version in referenced:
        base = blobs[version].split(b";", 1)[0].decode()[len(REF_MARK) :]
        assert base.startswith("messages:") and base.split(":")[1] in full
    assert sum(len(b) for b in blobs.values()) < 0.5 * sum(
        len(saver._core.codec.dumps(m, "x")) for _, m in chat.put
    )
    # each record lists its values' refs, then after ",," the bases
    for checkpoint_id, version in zip(ids, sorted(blobs), strict=True):
        refs = record_refs(client, prefix, checkpoint_id)
        assert sorted(refs[0]) == [f"messages:{version}", f"turn:{version}"]
        if version in referenced:
            base = blobs[version].split(b";", 1)[0].decode()[len(REF_MARK) :]
            assert refs[1] == [base]
        else:
            assert refs[1] == []
    chat.check(saver)
    assert [t.checkpoint["id"] for t in saver.list(cfg("t"))] == ids[::-1]
    assert saver.check_invariants() == []


def test_a_restarted_saver_goes_on_against_the_base_it_reads(
    server_url: str, prefix: str, client: redis.Redis
) -> None:
    chat = Chat()
    with RedisSaver(server_url, prefix=prefix) as first:
        chat.turn(first)
        chat.turn(first)
    bases_before = {v for v, s in message_blobs(client, prefix).items() if not s.startswith(b"zr:")}
    with RedisSaver(server_url, prefix=prefix) as second:  # a cold cache
        assert second.get_tuple(cfg("t")) is not None  # as LangGraph does before a run
        chat.turn(second)
        stored = message_blobs(client, prefix)["00000003"]
        assert stored.startswith(b"zr:messages:00000001;")
        chat.check(second)
    assert bases_before == {"00000001"}


def test_prune_trim_and_delete_for_runs_keep_the_bases_of_what_they_keep(
    server_url: str, prefix: str, client: redis.Redis
) -> None:
    with RedisSaver(server_url, prefix=prefix) as saver:
        chat = Chat("pruned")
        for _ in range(6):
            chat.turn(saver)
        saver.prune(["pruned"])
        chat.check(saver, [chat.put[-1][0]])

        runs = Chat("runs")
        runs.turn(saver, "run-a")  # the base
        later = [runs.turn(saver, "run-b") for _ in range(3)]
        saver.delete_for_runs(["run-a"])
        runs.check(saver, later)
        assert saver.check_invariants() == []
    with RedisSaver(server_url, prefix=prefix, keep_last=2) as trimming:
        trimmed = Chat("trimmed")
        for _ in range(6):
            trimmed.turn(trimming)
        kept = [checkpoint_id for checkpoint_id, _ in trimmed.put[-2:]]
        trimmed.check(trimming, kept)
        assert [t.checkpoint["id"] for t in trimming.list(cfg("trimmed"))] == kept[::-1]
        # the kept ones are stored against version 1, trimmed with its checkpoint but kept
        # as their base
        assert record_refs(client, prefix, kept[-1]) == [
            ["messages:00000006", "turn:00000006"],
            ["messages:00000001"],
        ]
        trimming.copy_thread("trimmed", "copy")
        copied = trimming.get_tuple(cfg("copy"))
        assert copied is not None
        assert copied.checkpoint["channel_values"]["messages"] == trimmed.messages
        assert trimming.check_invariants() == []


def test_a_base_that_is_gone_makes_the_put_send_the_value_in_full(
    server_url: str, prefix: str, client: redis.Redis, round_trips: RoundTrips
) -> None:
    with (
        RedisSaver(server_url, prefix=prefix) as writer,
        RedisSaver(server_url, prefix=prefix) as other,
    ):
        chat = Chat()
        chat.turn(writer)  # writer's cache: version 1 is the base
        other.delete_thread("t")  # another process deletes the thread
        chat.parent = None
        chat.turn(writer)  # compressed against version 1, which is gone: sent again in full
        assert not message_blobs(client, prefix)["00000002"].startswith(b"zr:")
        chat.check(writer, [chat.put[-1][0]])
        assert writer.check_invariants() == []


def test_a_stored_value_never_takes_another_base(
    server_url: str, prefix: str, client: redis.Redis
) -> None:
    with RedisSaver(server_url, prefix=prefix) as first:
        chat = Chat()
        chat.turn(first)
        second_id = chat.turn(first)  # version 2 against version 1
        version_2 = chat.put[-1][1]
        assert message_blobs(client, prefix)["00000002"].startswith(b"zr:messages:00000001;")
    with RedisSaver(server_url, prefix=prefix) as other:
        fork = Chat("t")
        fork.version = 2
        fork.messages = list(version_2)
        fork.parent = second_id
        fork.turn(other)  # version 3 in full: other's base
        # other puts checkpoint 2 again, the same versions: against its base (version 3) it
        # would need a base no record of version 2 lists; it goes in full instead
        checkpoint = make_checkpoint(
            {"messages": version_2, "turn": 2}, {"messages": "00000002", "turn": "00000002"}
        )
        checkpoint["id"] = second_id
        other.put(cfg("t", "", chat.put[0][0]), checkpoint, {"step": 2}, {"messages": "00000002"})
        stored = message_blobs(client, prefix)["00000002"]
        assert not stored.startswith(b"zr:messages:00000003;")
        chat.check(other)
        fork.check(other)
        assert other.check_invariants() == []


def test_encrypted_values_are_compressed_against_bases_before_encryption(
    server_url: str, prefix: str, client: redis.Redis
) -> None:
    serde = EncryptedSerializer.from_pycryptodome_aes(key=b"0123456789abcdef")
    with RedisSaver(server_url, prefix=prefix, serde=serde) as saver:
        chat = Chat()
        for _ in range(4):
            chat.turn(saver)
        blobs = message_blobs(client, prefix)
        assert blobs["00000002"].startswith(b"zr:messages:00000001;msgpack+aes\0")
        # no plaintext of the chat in what is stored
        assert message(1).content[3:43].encode() not in b"".join(blobs.values())
        chat.check(saver)
    with RedisSaver(server_url, prefix=prefix) as without_key:
        try:
            without_key.get_tuple(cfg("t"))
        except Exception as exc:  # LangGraph's serializer says it cannot read it
            assert "aes" in str(exc) or "Unknown serialization type" in str(exc)
        else:
            raise AssertionError("read encrypted values without the key")


def test_no_bases_without_compression(server_url: str, prefix: str, client: redis.Redis) -> None:
    with RedisSaver(server_url, prefix=prefix, compression=False) as saver:
        chat = Chat()
        for _ in range(4):
            chat.turn(saver)
        assert not any(s.startswith(b"zr:") for s in message_blobs(client, prefix).values())
        chat.check(saver)


def test_a_seed_stored_against_a_base_is_read_with_it(saver: RedisSaver) -> None:
    def scenario(saver: Any) -> Any:
        config = None
        for step in range(3):
            values = {"log": [message(n) for n in range(step + 4)]} if step < 2 else {}
            checkpoint = make_checkpoint(values, {"log": str(min(step, 1))})
            metadata: dict[str, Any] = {"step": step}
            if step == 2:  # "log" is a DeltaChannel from here on
                metadata["counters_since_delta_snapshot"] = {"log": 1}
            config = saver.put(
                config or cfg("t"), checkpoint, metadata, {"log": str(step)} if values else {}
            )
        return saver.get_delta_channel_history(config=config, channels=["log"])

    expected = scenario(InMemorySaver())
    assert expected["log"]["seed"] == [message(n) for n in range(5)]
    assert scenario(saver) == expected


def test_a_copy_onto_a_thread_with_the_same_values_in_another_form(
    server_url: str, prefix: str, client: redis.Redis
) -> None:
    """copy_thread onto a thread that holds some of the same blobs stored another way (a
    copy made before, whose value was since put again in full): every checkpoint of both
    threads reads back, and every record lists the bases of its blobs."""
    with RedisSaver(server_url, prefix=prefix) as saver:
        chat = Chat("source")
        for _ in range(3):
            chat.turn(saver)
        saver.copy_thread("source", "target")
    with RedisSaver(server_url, prefix=prefix) as cold:  # no bases: puts values in full
        second_id, messages = chat.put[1]
        checkpoint = make_checkpoint(
            {"messages": messages, "turn": 2}, {"messages": "00000002", "turn": "00000002"}
        )
        checkpoint["id"] = second_id
        cold.put(
            cfg("target", "", chat.put[0][0]), checkpoint, {"step": 2}, {"messages": "00000002"}
        )
        (key,) = keys_of(client, f"{prefix}:blob:{{target}}:*:messages:00000002")
        assert not client.get(key).startswith(b"zr:")  # type: ignore[union-attr]
        cold.copy_thread("source", "target")  # the source's version 2 is stored against 1
        assert not client.get(key).startswith(b"zr:")  # type: ignore[union-attr]
        for thread in ("source", "target"):
            chat.thread = thread
            chat.check(cold)
        assert cold.check_invariants() == []


def test_keep_last_1_stores_values_in_full(
    server_url: str, prefix: str, client: redis.Redis
) -> None:
    """One checkpoint kept: a value and its base would take more than the value in full."""
    with RedisSaver(server_url, prefix=prefix, keep_last=1) as saver:
        chat = Chat()
        for _ in range(4):
            chat.turn(saver)
        blobs = message_blobs(client, prefix)
        assert list(blobs) == ["00000004"]
        assert blobs["00000004"].startswith(b"z:msgpack\0")
        chat.check(saver, [chat.put[-1][0]])


# -- found by review: each reproduced a checkpoint that no longer read -------------------------
def put_messages(
    saver: RedisSaver,
    thread: str,
    parent: str | None,
    messages: list[Any],
    version: str,
    new: bool = True,
) -> str:
    checkpoint = make_checkpoint({"messages": messages}, {"messages": version})
    saver.put(
        cfg(thread, "", parent),
        checkpoint,
        {"step": 1, "run_id": "r"},
        {"messages": version} if new else {},
    )
    return checkpoint["id"]


def test_a_base_written_again_compressed_is_not_used_from_a_stale_cache(
    server_url: str, prefix: str
) -> None:
    """Saver B caches version 1 as a base; A prunes it away and, sharing it in a child of its
    first checkpoint, writes it again (in full now); B's value against its cached bytes must
    not depend on what is stored now unless it is those very bytes."""
    one, grown, two = [message(1)], [message(n) for n in range(1, 40)], [message(1), message(2)]
    with RedisSaver(server_url, prefix=prefix) as a, RedisSaver(server_url, prefix=prefix) as b:
        first = put_messages(a, "t", None, one, "1")
        assert b.get_tuple(cfg("t", "", first)) is not None  # b's base: version 1
        put_messages(a, "t", first, grown, "2")  # too far from version 1: a's new base
        a.prune(["t"])  # version 1 goes with its checkpoint
        put_messages(a, "t", first, one, "1", new=False)  # shares version 1: written again
        latest = put_messages(b, "t", first, two, "4")  # against b's cached version 1
        with RedisSaver(server_url, prefix=prefix) as fresh:
            got = fresh.get_tuple(cfg("t", "", latest))
            assert got is not None and got.checkpoint["channel_values"]["messages"] == two
            assert fresh.check_invariants() == []


def test_a_base_keeps_its_bytes_when_its_checkpoint_is_put_again(
    server_url: str, prefix: str, client: redis.Redis
) -> None:
    """Putting a checkpoint again must not change the bytes of a base (the same value can
    serialize differently in another process; here: another value under the same version)."""
    with RedisSaver(server_url, prefix=prefix) as saver:
        first = put_messages(saver, "t", None, [message(1)], "1")
        second = put_messages(saver, "t", first, [message(1), message(2)], "2")
        assert message_blobs(client, prefix)["2"].startswith(b"zr:messages:1;")
    with RedisSaver(server_url, prefix=prefix) as other:
        checkpoint = make_checkpoint({"messages": [message(3)]}, {"messages": "1"})
        checkpoint["id"] = first
        other.put(cfg("t"), checkpoint, {"step": 1}, {"messages": "1"})
        got = other.get_tuple(cfg("t", "", second))
        assert got is not None
        assert got.checkpoint["channel_values"]["messages"] == [message(1), message(2)]
        assert other.check_invariants() == []


def test_a_copy_renews_the_bases_its_records_take_from_the_target(
    server_url: str, prefix: str, client: redis.Redis
) -> None:
    """With a ttl: the target stores version 2 against another base than the source's; the
    copied record lists that base, which must live as long as the copy."""
    grow = lambda k: [message(n) for n in range(1, k + 1)]  # noqa: E731
    with RedisSaver(server_url, prefix=prefix, ttl=timedelta(seconds=60)) as saver:
        first = put_messages(saver, "S", None, grow(1), "1")
        second = put_messages(saver, "S", first, grow(2), "2")
        saver.copy_thread("S", "T")
        put_messages(saver, "T", second, grow(40), "3")  # full: the next base
        saver.prune(["T"])  # versions 1 and 2 go from T
        put_messages(saver, "T", second, grow(2), "2", new=False)  # version 2 written again
        advance_time(client, prefix, 50)
        saver.copy_thread("S", "T")  # the copy of `second` lists T's version 2's base
        advance_time(client, prefix, 20)
        got = saver.get_tuple(cfg("T", "", second))
        assert got is not None and got.checkpoint["channel_values"]["messages"] == grow(2)


class PlusTypeSerde:
    """A serializer whose type has a "+" in it, as an EncryptedSerializer's has."""

    def dumps_typed(self, obj: Any) -> tuple[str, bytes]:
        return "json+v1", json.dumps(obj).encode()

    def loads_typed(self, data: tuple[str, bytes]) -> Any:
        type_, payload = data
        if type_ != "json+v1":
            raise ValueError(f"unknown type {type_!r}")
        return json.loads(payload)


def test_a_serializer_type_with_a_plus_reads_its_compressed_values(
    server_url: str, prefix: str, client: redis.Redis
) -> None:
    with RedisSaver(server_url, prefix=prefix, serde=PlusTypeSerde()) as saver:
        config = None
        for version in (1, 2):
            checkpoint = make_checkpoint(
                {"doc": PROSE[:1500] + "x" * version}, {"doc": str(version)}
            )
            config = saver.put(config or cfg("t"), checkpoint, {}, {"doc": str(version)})
        (key,) = keys_of(client, f"{prefix}:blob:*:doc:2")
        assert client.get(key).startswith(b"zr:doc:1;json+v1\0")  # type: ignore[union-attr]
        got = saver.get_tuple(cfg("t"))
        assert got is not None and got.checkpoint["channel_values"]["doc"] == PROSE[:1500] + "xx"


def test_a_long_chat_is_stored_against_its_base_in_few_bytes(
    saver: RedisSaver, prefix: str, client: redis.Redis
) -> None:
    """Found by review: at zstd level 1 the dictionary's hash table covers some 100 KB of the
    base, so one more message on a 400 KB history came out at kilobytes (level 3, with a
    table sized to the base: a few hundred bytes)."""
    history = [message(n) for n in range(2, 900)]  # 300-character messages: ~400 KB
    first = put_messages(saver, "t", None, history, "1")
    later = put_messages(saver, "t", first, [*history, message(900)], "2")
    assert len(saver._core.codec.zstd.inner.dumps_typed(history)[1]) > 300_000
    blobs = message_blobs(client, prefix)
    assert blobs["2"].startswith(b"zr:messages:1;") and len(blobs["2"]) < 1_000
    got = saver.get_tuple(cfg("t", "", later))
    assert got is not None and got.checkpoint["channel_values"]["messages"][-1] == message(900)


def test_the_caches_of_bases_count_what_they_hold() -> None:
    """Found by review: the base cache counted a base's serialized bytes only, not its stored
    form nor zstd's tables (several times its size), so 32 MB held 0.5-0.9 GB."""
    raw = b"x" * 5_000
    bases = [
        Base(f"c:{n}", raw + b"%d" % n, b"z:msgpack\0%04d" % n + b"y" * 1_996) for n in range(10)
    ]
    cache = BaseCache(max_bytes=3 * bases[0].size)
    for n, base in enumerate(bases):
        cache.put(("t", "", f"c{n}"), base)
    assert bases[0].size == 5_001 + 2_010
    kept = [cache.get(("t", "", f"c{n}")) is not None for n in range(10)]
    assert kept == [False] * 7 + [True] * 3
    dictionaries = CompressionDictionaries(max_bytes=1 << 20)
    for base in bases:
        dictionaries.get(base, 1)
    params = reference_parameters(len(raw), 1)
    one = 4 * ((1 << params.hash_log) + (1 << params.chain_log)) + 2 * len(raw)
    assert len(dictionaries._dictionaries) == max(1, (1 << 20) // one)


def resident_bytes() -> int:
    """This process's resident memory (Linux, as the suite's servers), after a collection."""
    gc.collect()
    return int(Path("/proc/self/statm").read_text().split()[1]) * os.sysconf("SC_PAGE_SIZE")


class RandomChat:
    """A thread whose ``messages`` is random bytes (compressible only against its base): a
    first one of ``first`` bytes, then one of 400 bytes more a turn."""

    def __init__(self, thread: str, first: int) -> None:
        self.thread = thread
        self.messages = [os.urandom(first)]
        self.parent: str | None = None

    def turn(self, saver: RedisSaver) -> None:
        if self.parent is not None:
            self.messages = [*self.messages, os.urandom(400)]
        version = f"{len(self.messages):08d}"
        checkpoint = make_checkpoint({"messages": self.messages}, {"messages": version})
        config = saver.put(
            cfg(self.thread, "", self.parent),
            checkpoint,
            {"step": len(self.messages)},
            {"messages": version},
        )
        self.parent = config["configurable"]["checkpoint_id"]


def test_the_compressors_a_saver_keeps_do_not_grow_with_its_threads(
    saver: RedisSaver, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 27, defect 6: each OS thread that called a saver kept up to 8 zstd compressors
    bound to bases (1.7 MB each for a base of 200 KB) and one more: 32 threads taking turns
    of 8 chats of 200 KB held 256 + 32 of them (the issue's RSS: +440-485 MB, one thread
    +18-20). The saver's threads share them now: a call takes one out and gives it back, and
    the saver keeps REF_COMPRESSORS_KEPT against bases and one more here (one call at a
    time), while its threads are alive and after they end. Here the process grew by 217 MB
    while the threads were alive, by 29-30 MB now."""
    made: weakref.WeakSet[CountedCompressor] = weakref.WeakSet()
    against_base: weakref.WeakSet[CountedCompressor] = weakref.WeakSet()

    class CountedCompressor:
        """A zstd compressor that counts the live ones (zstandard's own types cannot be
        subclassed safely, nor referenced weakly)."""

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            self.compressor = make_compressor(*args, **kwargs)
            made.add(self)
            if kwargs.get("dict_data") is not None:
                against_base.add(self)

        def compress(self, data: bytes) -> bytes:
            return self.compressor.compress(data)

        def memory_size(self) -> int:
            return self.compressor.memory_size()

    make_compressor = zstandard.ZstdCompressor
    monkeypatch.setattr(zstandard, "ZstdCompressor", CountedCompressor)
    chats = [RandomChat(f"t{n}", 200_000) for n in range(8)]
    for chat in chats:
        chat.turn(saver)  # its base, stored in full (random bytes do not compress)
    one_at_a_time = threading.Lock()  # (so that the counts do not depend on timing)
    turns_taken = threading.Barrier(33)
    may_end = threading.Event()

    def serve() -> None:
        with one_at_a_time:
            for chat in chats:
                chat.turn(saver)
        turns_taken.wait()
        may_end.wait()

    before = resident_bytes()
    threads = [threading.Thread(target=serve) for _ in range(32)]
    for thread in threads:
        thread.start()
    turns_taken.wait()
    try:
        alive = (len(made), len(against_base))
        grown = resident_bytes() - before
    finally:
        may_end.set()
        for thread in threads:
            thread.join()
    ended = (len(made), len(against_base))
    assert alive == ended == (REF_COMPRESSORS_KEPT + 1, REF_COMPRESSORS_KEPT)
    assert grown < 100 << 20
    for chat in chats:
        got = saver.get_tuple(cfg(chat.thread, "", chat.parent))
        assert got is not None and got.checkpoint["channel_values"]["messages"] == chat.messages


def test_the_compressors_kept_against_bases_are_bounded_in_number_and_bytes() -> None:
    """RefCompressors keeps the compressors given back last: at most ``kept``, and at most
    ``max_bytes`` of them by zstd's count (a base of some MB makes one of over 10 MB); one
    larger than that alone is not kept."""
    raw = os.urandom(20_000)
    dictionaries = [
        CompressionDictionaries().get(Base(f"c:{n}", raw + b"%d" % n, b"x\0" + raw), 3)
        for n in range(4)
    ]
    compressors = []
    for dictionary in dictionaries:
        compressor = zstandard.ZstdCompressor(dict_data=dictionary, write_checksum=True)
        compressor.compress(raw + b"more")
        compressors.append(compressor)
    size = compressors[0].memory_size()
    assert [c.memory_size() for c in compressors] == [size] * 4
    kept = RefCompressors(kept=3, max_bytes=2 * size)
    for dictionary, compressor in zip(dictionaries, compressors, strict=True):
        kept.give(dictionary, compressor)
    assert (len(kept), kept.bytes) == (2, 2 * size)  # the last two: the bytes bound
    assert kept.take(dictionaries[1]) is None
    assert kept.take(dictionaries[3]) is compressors[3]
    assert kept.take(dictionaries[3]) is None  # (taken: the caller's until given back)
    assert (len(kept), kept.bytes) == (1, size)
    kept = RefCompressors(kept=2, max_bytes=10 * size)
    for dictionary, compressor in zip(dictionaries, compressors, strict=True):
        kept.give(dictionary, compressor)
    assert (len(kept), kept.bytes) == (2, 2 * size)  # the last two: the count bound
    assert [kept.take(d) for d in dictionaries] == [None, None, *compressors[2:]]
    small = RefCompressors(kept=2, max_bytes=size - 1)
    small.give(dictionaries[0], compressors[0])
    assert (len(small), small.bytes) == (0, 0)


def test_a_changed_base_fails_the_read_naming_what_cannot_be_read(
    saver: RedisSaver, prefix: str, client: redis.Redis
) -> None:
    first = put_messages(saver, "t", None, [message(1)], "1")
    second = put_messages(saver, "t", first, [message(1), message(2)], "2")
    (base_key,) = keys_of(client, f"{prefix}:blob:*:messages:1")
    other = saver._core.codec.dumps_channel(("x", "", "messages"), "messages:9", [message(3)])[0]
    client.set(base_key, other)  # by hand: a store damaged outside the saver
    with pytest.raises(ValueError) as raised:
        saver.get_tuple(cfg("t", "", second))
    assert str(raised.value).startswith(
        f"channel 'messages' of checkpoint '{second}' in thread 't' (namespace '') cannot be "
        "read: a stored value of type 'zr:messages:1;msgpack' does not decompress with its base"
    )


def commands_run(url: str, action: Callable[[], object]) -> list[str]:
    """Every command the server ran during ``action``, those of scripts and functions too
    (MONITOR: a private server's, with nothing else on it)."""
    seen: list[str] = []
    monitor_client = redis.Redis.from_url(url)
    with monitor_client.monitor() as monitor:
        done = "end of the action " + secrets.token_hex(4)

        def listen() -> None:
            while True:
                command = monitor.next_command()["command"]
                if command == f"ECHO {done}":
                    return
                seen.append(command)

        listener = threading.Thread(target=listen)
        listener.start()
        control = redis.Redis.from_url(url)
        control.ping()  # (the monitor is listening once its PING shows: wait for it)
        while not seen:
            control.ping()
        seen.clear()
        action()
        control.echo(done)
        listener.join(timeout=30)
    return seen


def test_a_put_checks_its_base_by_the_mark_at_its_head(private_server: PrivateServer) -> None:
    """The put makes sure a value's base is still the bytes it was compressed against by the
    mark at the head of the base ("u:b:<digest>;"): it never reads the base, which
    grows with a chat's history. (It read and digested all of it: in a chat that kept its
    messages, every put's server instructions grew by the history's size, 3x at 300 turns.)"""
    with RedisSaver(private_server.url, prefix="p") as saver:
        chat = Chat()
        chat.turn(saver)  # version 1, in full: the base
        client = redis.Redis.from_url(private_server.url)
        (base_key,) = keys_of(client, "p:blob:*:messages:00000001")
        mark = client.getrange(base_key, 0, 36).decode()
        assert re.fullmatch(r"u:b:[0-9a-f]{32};", mark), mark
        ran = commands_run(private_server.url, lambda: chat.turn(saver))  # version 2
        assert message_blobs(client, "p")["00000002"].startswith(b"zr:messages:00000001;")
        on_base = [command for command in ran if base_key in command]
        assert on_base == [f"GETRANGE {base_key} 0 36", f"PTTL {base_key}"]
        chat.check(saver)
        assert saver.check_invariants() == []


def strip_mark(client: redis.Redis, key: str) -> bytes:
    """The blob at ``key`` stored again without its base mark, as a version before marks
    wrote it; its bytes now."""
    stored = client.get(key)
    assert stored is not None and stored.startswith(b"u:b:")
    unmarked = without_base_mark(stored)
    client.set(key, unmarked)
    return unmarked


def test_a_base_stored_without_a_mark_is_checked_by_its_bytes(
    server_url: str, prefix: str, client: redis.Redis
) -> None:
    """A base written before marks (a mixed store) is still a base: the put checks the SHA1
    of its bytes, and sends the value in full when they are not the bytes it knows."""
    with RedisSaver(server_url, prefix=prefix) as first:
        chat = Chat()
        chat.turn(first)
    (base_key,) = keys_of(client, f"{prefix}:blob:*:messages:00000001")
    unmarked = strip_mark(client, base_key)
    with RedisSaver(server_url, prefix=prefix) as reader:
        assert reader.get_tuple(cfg("t")) is not None  # its base: the unmarked version 1
        chat.turn(reader)  # version 2, against it
        assert message_blobs(client, prefix)["00000002"].startswith(b"zr:messages:00000001;")
        # version 1 written again as other bytes of the same value (another level): the
        # reader's next value against it goes in full
        type_, _, packed = unmarked.partition(b"\0")
        raw = zstandard.ZstdDecompressor().decompress(packed)
        client.set(base_key, type_ + b"\0" + zstandard.ZstdCompressor(level=9).compress(raw))
        chat.turn(reader)  # version 3: against version 1 it would not read
        assert not message_blobs(client, prefix)["00000003"].startswith(b"zr:")
        chat.check(reader)
        assert reader.check_invariants() == []


def test_a_malformed_base_mark_fails_the_read_naming_it(
    saver: RedisSaver, prefix: str, client: redis.Redis
) -> None:
    put_messages(saver, "t", None, [message(1)], "1")
    (key,) = keys_of(client, f"{prefix}:blob:*:messages:1")
    stored = client.get(key)
    assert stored is not None
    client.set(key, b"u:b:not-a-mark;" + without_base_mark(stored))  # by hand
    with pytest.raises(ValueError, match="of type 'u:b:not-a-mark;z:msgpack' has a malformed"):
        saver.get_tuple(cfg("t"))


def test_get_tuple_does_not_send_back_a_base_the_saver_holds(
    private_server: PrivateServer,
) -> None:
    """A saver holds the bases it wrote or read; get_tuple names them by their marks, and the
    script sends back "" for a base still stored with that mark instead of its bytes (a
    chat's base is its history: it was read whole at every turn)."""
    with RedisSaver(private_server.url, prefix="p") as saver:
        chat = Chat()
        chat.turn(saver)  # version 1, in full: the base saver holds
        chat.turn(saver)  # version 2, against it
        client = redis.Redis.from_url(private_server.url)
        (base_key,) = keys_of(client, "p:blob:*:messages:00000001")
        (value_key,) = keys_of(client, "p:blob:*:messages:00000002")
        got: list[Any] = []
        ran = commands_run(private_server.url, lambda: got.append(saver.get_tuple(cfg("t"))))
        assert got[0].checkpoint["channel_values"]["messages"] == chat.messages
        (mget,) = [command for command in ran if command.startswith("MGET ")]
        assert value_key in mget.split() and base_key not in mget.split()
        assert f"GETRANGE {base_key} 0 36" in ran
    with RedisSaver(private_server.url, prefix="p") as fresh:  # holds nothing: reads it
        ran = commands_run(private_server.url, lambda: got.append(fresh.get_tuple(cfg("t"))))
        assert got[1].checkpoint["channel_values"]["messages"] == chat.messages
        (mget,) = [command for command in ran if command.startswith("MGET ")]
        assert base_key in mget.split() and not [c for c in ran if c.startswith("GETRANGE")]


def test_a_held_base_stored_again_under_another_mark_is_read(
    server_url: str, prefix: str, client: redis.Redis
) -> None:
    """The base a saver holds was deleted and stored again (another write, another mark, here
    other bytes): get_tuple reads it from the server, and the value decodes against it."""
    with (
        RedisSaver(server_url, prefix=prefix) as saver,
        RedisSaver(server_url, prefix=prefix) as other,
    ):
        first = put_messages(saver, "t", None, [message(1)], "1")  # saver holds version 1
        other.delete_thread("t")
        # other stores version 1 again, another value under the same version, and a value
        # against it
        stored_again = [message(1), message(3)]  # (1 KB or more: a base)
        first = put_messages(other, "t", None, stored_again, "1")
        latest = put_messages(other, "t", first, [*stored_again, message(4)], "2")
        assert message_blobs(client, prefix)["2"].startswith(b"zr:messages:1;")
        got = saver.get_tuple(cfg("t"))
        assert got is not None and got.config["configurable"]["checkpoint_id"] == latest
        assert got.checkpoint["channel_values"]["messages"] == [*stored_again, message(4)]
        # and saver now holds the stored version 1: its next value goes against it
        put_messages(saver, "t", latest, [*stored_again, message(4), message(5)], "3")
        assert message_blobs(client, prefix)["3"].startswith(b"zr:messages:1;")
        assert saver.check_invariants() == []


def chat_puts(n: int) -> list[tuple[Any, Any, Any, Any]]:
    """The put calls of a chat of n checkpoints whose messages grow by one each."""
    puts, messages, parent = [], [], None
    for v in range(1, n + 1):
        messages = [*messages, message(v)]
        version = f"{v:08d}"
        checkpoint = make_checkpoint(
            {"messages": messages, "turn": v}, {"messages": version, "turn": version}
        )
        versions = {"messages": version, "turn": version}
        puts.append((cfg("t", "", parent), checkpoint, {"step": v}, versions))
        parent = checkpoint["id"]
    return puts


def test_putting_checkpoints_again_leaves_their_stored_values_as_they_are(
    server_url: str, prefix: str, client: redis.Redis, round_trips: RoundTrips
) -> None:
    """Found by review: with a mark drawn at random, a saver that put a chat's checkpoints
    again (a migration copied again) held bases whose marks were not the stored ones, so each
    value against them went again in full, replacing a few hundred bytes by the history
    (+4% of a chat's blob bytes per copy). A mark is the digest of the bytes now."""
    puts = chat_puts(12)
    with RedisSaver(server_url, prefix=prefix) as first:
        for args in puts:
            first.put(*args)
    before = message_blobs(client, prefix)
    with RedisSaver(server_url, prefix=prefix) as again:
        again.put(*puts[0])  # (its first call loads the scripts)
        round_trips.reset()
        for args in puts[1:]:
            again.put(*args)
        assert round_trips.count == len(puts) - 1  # none sent again in full
        for _, checkpoint, _, _ in puts:
            got = again.get_tuple(cfg("t", "", checkpoint["id"]))
            assert got is not None
            assert got.checkpoint["channel_values"] == checkpoint["channel_values"]
    assert message_blobs(client, prefix) == before


def test_a_value_stored_before_marks_with_a_type_like_a_mark_reads_back(
    server_url: str, prefix: str, client: redis.Redis
) -> None:
    """Found by review: a first mark, "zb:", was a serializer type an earlier version stored
    as it was, unescaped; this version took it for a mark. (No earlier version stored a type
    that starts with "u:b:": it escaped every type that starts with "u:".)"""
    from .test_compression import TypedJson

    type_ = "zb:0123456789abcdef;json"
    with RedisSaver(server_url, prefix=prefix, serde=TypedJson(type_)) as saver:
        saver.put(cfg("t"), make_checkpoint({"a": "small"}, {"a": "1"}), {}, {"a": "1"})
        (key,) = keys_of(client, f"{prefix}:blob:*")
        assert client.get(key) == b'zb:0123456789abcdef;json\0"small"'
        got = saver.get_tuple(cfg("t"))
        assert got is not None and got.checkpoint["channel_values"] == {"a": "small"}
