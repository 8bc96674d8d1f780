"""Compression of stored values: zstd above a size, inside any encryption, readable whatever
the reader's setting (mixed stores), and a clear error for a bad option or a corrupt value."""

from __future__ import annotations

import json
import os
import re
from typing import Any

import pytest
import redis
import zstandard
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.serde.encrypted import EncryptedSerializer
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

from langgraph.checkpoint.rediskv import AsyncRedisSaver, RedisSaver
from langgraph.checkpoint.rediskv.compression import MIN_SIZE

from ..conftest import keys_of, record_of
from ..prose import PROSE as CORPUS_PROSE
from .test_contract import cfg, make_checkpoint

# real prose, not filler
PROSE = CORPUS_PROSE[:6000]
MESSAGES = [
    HumanMessage(content=PROSE[:300], id="h1"),
    AIMessage(content=PROSE[300:3000], id="a1"),
    HumanMessage(content=PROSE[3000:3400], id="h2"),
    AIMessage(content=PROSE[3400:6000], id="a2"),
]


def put_chat(saver: RedisSaver, thread: str) -> Any:
    checkpoint = make_checkpoint(
        {"messages": MESSAGES, "turn": 2, "tiny": "ok"}, {"messages": "1", "turn": "1", "tiny": "1"}
    )
    config = saver.put(
        cfg(thread),
        checkpoint,
        {"source": "loop", "step": 1},
        {"messages": "1", "turn": "1", "tiny": "1"},
    )
    saver.put_writes(config, [("messages", MESSAGES), ("turn", 3)], "task-1")
    return config


def stored_values(client: redis.Redis, prefix: str) -> dict[str, bytes]:
    """channel -> the stored blob ("<type>\\0<bytes>") of every blob key."""
    out = {}
    for key in keys_of(client, f"{prefix}:blob:*"):
        channel = key.rsplit(":", 2)[1]
        value = client.get(key)
        assert value is not None
        out[channel] = value
    return out


def written(client: redis.Redis, prefix: str) -> bytes:
    """The stored record of the first pending write (in its checkpoint's record)."""
    records = [record_of(client, key) for key in keys_of(client, f"{prefix}:cp:*")]
    (write,) = [v for r in records for f, v in r.items() if f.startswith("w:") and f.endswith(":0")]
    return write


def test_large_values_are_stored_compressed_small_ones_as_they_are(
    server_url: str, prefix: str, client: redis.Redis
) -> None:
    with RedisSaver(server_url, prefix=prefix) as saver:
        put_chat(saver, "t")
        blobs = stored_values(client, prefix)
        raw = JsonPlusSerializer().dumps_typed(MESSAGES)[1]
        type_, _, packed = blobs["messages"].partition(b"\0")
        # a value that may serve as a base carries the mark of its write (reference compression)
        assert re.fullmatch(rb"u:b:[0-9a-f]{32};z:msgpack", type_), type_
        assert zstandard.ZstdDecompressor().decompress(packed) == raw
        assert len(packed) < len(raw) / 2  # real prose: about 3x
        assert blobs["tiny"] == b"msgpack\0" + JsonPlusSerializer().dumps_typed("ok")[1]
        assert len(JsonPlusSerializer().dumps_typed("ok")[1]) < MIN_SIZE
        assert b"z:msgpack\0" in written(client, prefix)  # pending writes too
        (cp,) = keys_of(client, f"{prefix}:cp:*")
        assert record_of(client, cp)["ck"].startswith(b"z:msgpack\0")
        loaded = saver.get_tuple(cfg("t"))
        assert loaded is not None
        assert loaded.checkpoint["channel_values"] == {
            "messages": MESSAGES,
            "turn": 2,
            "tiny": "ok",
        }
        assert [w[1:] for w in loaded.pending_writes or []] == [("messages", MESSAGES), ("turn", 3)]


def test_compression_off_stores_what_the_serializer_writes(
    server_url: str, prefix: str, client: redis.Redis
) -> None:
    with RedisSaver(server_url, prefix=prefix, compression=False) as saver:
        put_chat(saver, "t")
        blobs = stored_values(client, prefix)
        assert blobs["messages"] == b"msgpack\0" + JsonPlusSerializer().dumps_typed(MESSAGES)[1]
        assert b"z:" not in written(client, prefix)


@pytest.mark.parametrize(("writer", "reader"), [(False, True), (True, False), (9, 1)])
def test_a_store_written_with_one_setting_reads_with_another(
    server_url: str, prefix: str, writer: Any, reader: Any
) -> None:
    with RedisSaver(server_url, prefix=prefix, compression=writer) as saver:
        put_chat(saver, "t")
        before = saver.get_tuple(cfg("t"))
    with RedisSaver(server_url, prefix=prefix, compression=reader) as saver:
        after = saver.get_tuple(cfg("t"))
        assert after is not None and before is not None
        assert after.checkpoint == before.checkpoint
        assert after.metadata == before.metadata
        assert after.pending_writes == before.pending_writes
        # a child written under the new setting shares the parent's stored blobs
        child = make_checkpoint(
            before.checkpoint["channel_values"] | {"turn": 3},
            before.checkpoint["channel_versions"] | {"turn": "2"},
        )
        saver.put(after.config, child, {"source": "loop", "step": 2}, {"turn": "2"})
        latest = saver.get_tuple(cfg("t"))
        assert latest is not None
        assert latest.checkpoint["channel_values"]["messages"] == MESSAGES


def test_incompressible_values_are_stored_as_they_are(
    server_url: str, prefix: str, client: redis.Redis
) -> None:
    noise = os.urandom(4000)
    with RedisSaver(server_url, prefix=prefix) as saver:
        checkpoint = make_checkpoint({"noise": noise}, {"noise": "1"})
        saver.put(cfg("t"), checkpoint, {}, {"noise": "1"})
        type_, _, data = stored_values(client, prefix)["noise"].partition(b"\0")
        assert re.fullmatch(rb"u:b:[0-9a-f]{32};bytes", type_), type_  # (a base: its mark)
        assert data == noise
        loaded = saver.get_tuple(cfg("t"))
        assert loaded is not None and loaded.checkpoint["channel_values"] == {"noise": noise}


def test_with_encryption_values_are_compressed_before_they_are_encrypted(
    server_url: str, prefix: str, client: redis.Redis
) -> None:
    pytest.importorskip("Crypto")
    key = b"0123456789abcdef0123456789abcdef"
    serde = EncryptedSerializer.from_pycryptodome_aes(key=key)
    with RedisSaver(server_url, prefix=prefix, serde=serde) as saver:
        put_chat(saver, "t")
        type_, _, ciphertext = stored_values(client, prefix)["messages"].partition(b"\0")
        assert re.fullmatch(rb"u:b:[0-9a-f]{32};z:msgpack\+aes", type_), type_
        raw = JsonPlusSerializer().dumps_typed(MESSAGES)[1]
        assert len(ciphertext) < len(raw) / 2  # ciphertext of the compressed plaintext
        assert PROSE[:40].encode() not in ciphertext
        loaded = saver.get_tuple(cfg("t"))
        assert loaded is not None and loaded.checkpoint["channel_values"]["messages"] == MESSAGES
    # LangGraph's own EncryptedSerializer, without this saver, decrypts to the zstd frame
    plain = serde.cipher.decrypt("aes", ciphertext)
    assert zstandard.ZstdDecompressor().decompress(plain) == raw


async def test_the_async_saver_compresses_too(
    server_url: str, prefix: str, client: redis.Redis
) -> None:
    async with AsyncRedisSaver(server_url, prefix=prefix) as saver:
        checkpoint = make_checkpoint({"messages": MESSAGES}, {"messages": "1"})
        await saver.aput(cfg("t"), checkpoint, {}, {"messages": "1"})
        assert re.match(rb"u:b:[0-9a-f]{32};z:msgpack\0", stored_values(client, prefix)["messages"])
        loaded = await saver.aget_tuple(cfg("t"))
        assert loaded is not None and loaded.checkpoint["channel_values"]["messages"] == MESSAGES


@pytest.mark.parametrize("bad", [0, 23, -1, "zstd", 2.5])
def test_a_bad_compression_option_is_refused(server_url: str, bad: Any) -> None:
    with pytest.raises(ValueError, match=r"invalid compression .*zstd level from 1 to 22"):
        RedisSaver(server_url, compression=bad)


def test_a_corrupt_compressed_value_names_the_problem(
    server_url: str, prefix: str, client: redis.Redis
) -> None:
    with RedisSaver(server_url, prefix=prefix) as saver:
        put_chat(saver, "t")
        (key,) = [k for k in keys_of(client, f"{prefix}:blob:*") if ":messages:" in k]
        client.set(key, b"z:msgpack\0not zstd at all")
        with pytest.raises(ValueError, match="marked 'z:msgpack' is not valid zstd"):
            saver.get_tuple(cfg("t"))


class TypedJson:
    """A serializer whose type strings are its own choice."""

    def __init__(self, type_: str) -> None:
        self.type_ = type_

    def dumps_typed(self, obj: Any) -> tuple[str, bytes]:
        return self.type_, json.dumps(obj).encode()

    def loads_typed(self, data: tuple[str, bytes]) -> Any:
        type_, payload = data
        assert type_ == self.type_, f"got type {type_!r}"
        return json.loads(payload)


@pytest.mark.parametrize(
    ("type_", "value"),
    [
        ("z:json", "small"),  # stored as it is, with a type that looks like the mark
        ("z:json", "x" * 1000),  # compressed
        ("u:json", "small"),  # looks like the escape
        ("u:b:0123456789abcdef0123456789abcdef;json", "small"),  # looks like a base's mark
        ("u:b:0123456789abcdef0123456789abcdef;json", "x" * 2000),  # compressed, a base
        ("json+gzip", "x" * 1000),  # a "+" that is not a cipher's
    ],
)
def test_a_serializer_type_that_looks_like_a_mark_reads_back(
    server_url: str, prefix: str, type_: str, value: str
) -> None:
    # Found by review: "z:json" was taken for compressed, "z:json+gzip" never decompressed.
    with RedisSaver(server_url, prefix=prefix, serde=TypedJson(type_)) as saver:
        checkpoint = make_checkpoint({"a": value}, {"a": "1"})
        config = saver.put(cfg("t"), checkpoint, {}, {"a": "1"})
        got = saver.get_tuple(config)
        assert got is not None and got.checkpoint["channel_values"] == {"a": value}
