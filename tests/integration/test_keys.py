"""The key schema: an injective, glob-safe encoding, one hash slot per thread, and the Lua
half of the schema agreeing with the Python half."""

from __future__ import annotations

import string

import pytest
import redis
from hypothesis import given, settings
from hypothesis import strategies as st
from langgraph.checkpoint.base import empty_checkpoint
from redis.crc import key_slot

from langgraph.checkpoint.rediskv import RedisSaver
from langgraph.checkpoint.rediskv.canonical import canonical
from langgraph.checkpoint.rediskv.keys import KeySchema, blob_ref, decode_part, encode_part
from langgraph.checkpoint.rediskv.scripts import lua_dir

from ..conftest import data_keys, keys_of

HOSTILE = [
    "",
    " ",
    "a b",
    "a*",
    "ab",
    "a?",
    "[a]",
    "{a}",
    "}{",
    "%",
    "%25",
    "k:x",
    "x|y",
    "a\\b",
    "ünïcødé-🙂",
    "\x00nul",
    "x" * 1200,
]
ENCODED_ALPHABET = set(string.ascii_letters + string.digits + "-._~%")


@given(st.text())
def test_encoding_round_trips_and_is_glob_safe(value: str) -> None:
    encoded = encode_part(value)
    assert decode_part(encoded) == value
    assert set(encoded) <= ENCODED_ALPHABET


def test_encoding_is_injective_on_hostile_ids() -> None:
    encoded = [encode_part(v) for v in HOSTILE]
    assert len(set(encoded)) == len(HOSTILE)
    assert encode_part("k:x") == "k%3Ax"
    assert encode_part("a*") == "a%2A"
    assert encode_part("{a}") == "%7Ba%7D"


def test_empty_thread_gets_a_non_empty_hash_tag() -> None:
    assert KeySchema.tag("") == "{%}"
    assert KeySchema.tag("%") == "{%25}"
    assert KeySchema.thread_from_tag("{%}") == ""
    assert KeySchema.thread_from_tag("{%25}") == "%"


def test_thread_and_namespace_never_run_into_each_other() -> None:
    keys = KeySchema("lg")
    tag_a, tag_b = keys.tag("k:x"), keys.tag("k")
    assert keys.checkpoint(tag_a, "y:z", "1") == "lg:cp:{k%3Ax}:y%3Az:1"
    assert keys.checkpoint(tag_b, "x:y:z", "1") == "lg:cp:{k}:x%3Ay%3Az:1"


@pytest.mark.parametrize("bad", ["", "a:b", "a b", "a*", "{a}", "x" * 65, "é"])
def test_invalid_prefix_is_refused(bad: str) -> None:
    with pytest.raises(ValueError, match="invalid key prefix"):
        KeySchema(bad)


def _lua_encoder(client: redis.Redis) -> object:
    source = (lua_dir() / "include" / "keyschema.lua").read_text()
    return client.register_script(source + "\nreturn enc(ARGV[1])")


def test_lua_encoding_matches_python_on_hostile_ids(client: redis.Redis) -> None:
    encode_in_lua = _lua_encoder(client)
    for value in HOSTILE:
        assert encode_in_lua(args=[value]).decode() == encode_part(value), value  # type: ignore[operator]


def test_the_deadline_ledger_key_is_the_same_in_lua_and_python(client: redis.Redis) -> None:
    source = (lua_dir() / "include" / "keyschema.lua").read_text()
    ledger_in_lua = client.register_script(
        source + "\nreturn keyspace(ARGV[1], ARGV[2]).ledger(enc(ARGV[3]))"
    )
    schema = KeySchema("pfx")
    for ns in ["", "child:1", "a b|c", "\u00e9"]:
        tag = schema.tag("th:1")
        assert ledger_in_lua(args=["pfx", tag, ns]).decode() == schema.ledger(tag, ns)
    assert schema.ledger("{t}", "sub:1") == "pfx:dl:{t}:sub%3A1"


@settings(max_examples=200, deadline=None)
@given(value=st.text())
def test_lua_encoding_matches_python(value: str, server_url: str) -> None:
    client = redis.Redis.from_url(server_url)
    try:
        raw = value.encode("utf-8", "surrogatepass")
        assert _lua_encoder(client)(args=[raw]).decode() == encode_part(value)  # type: ignore[operator]
    finally:
        client.close()


def _put(saver: RedisSaver, thread_id: str, ns: str = "", value: str = "v") -> str:
    checkpoint = empty_checkpoint()
    checkpoint["channel_values"] = {"x": value}
    checkpoint["channel_versions"] = {"x": saver.get_next_version(None, None)}
    config = {"configurable": {"thread_id": thread_id, "checkpoint_ns": ns}}
    saver.put(config, checkpoint, {"source": "input", "step": -1}, checkpoint["channel_versions"])
    return checkpoint["id"]


def test_hostile_thread_ids_get_their_own_keys(saver: RedisSaver, client: redis.Redis) -> None:
    ids = {
        thread_id: _put(saver, thread_id, value=f"value of {thread_id!r}") for thread_id in HOSTILE
    }
    for thread_id, checkpoint_id in ids.items():
        tup = saver.get_tuple({"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}})
        assert tup is not None
        assert tup.config["configurable"]["thread_id"] == thread_id
        assert tup.checkpoint["id"] == checkpoint_id
        assert tup.checkpoint["channel_values"] == {"x": f"value of {thread_id!r}"}
        listed = list(saver.list({"configurable": {"thread_id": thread_id}}))
        assert [t.checkpoint["id"] for t in listed] == [checkpoint_id]
    # list(None) sees every thread exactly once
    seen = sorted(t.config["configurable"]["thread_id"] for t in saver.list(None))
    assert seen == sorted(HOSTILE)


def test_glob_characters_in_thread_ids_stay_literal(saver: RedisSaver, client: redis.Redis) -> None:
    _put(saver, "a*", value="star")
    kept = _put(saver, "ab", value="ab")
    keys = KeySchema(saver.prefix)
    assert keys_of(client, keys.thread_keys_pattern("a*")) != []
    saver.delete_thread("a*")
    assert keys_of(client, keys.thread_keys_pattern("a*")) == []
    tup = saver.get_tuple({"configurable": {"thread_id": "ab"}})
    assert tup is not None and tup.checkpoint["id"] == kept
    assert tup.checkpoint["channel_values"] == {"x": "ab"}


def test_colons_in_thread_and_namespace_never_collide(saver: RedisSaver) -> None:
    first = _put(saver, "k:x", ns="y:z", value="first")
    second = _put(saver, "k", ns="x:y:z", value="second")
    a = saver.get_tuple({"configurable": {"thread_id": "k:x", "checkpoint_ns": "y:z"}})
    b = saver.get_tuple({"configurable": {"thread_id": "k", "checkpoint_ns": "x:y:z"}})
    assert a is not None and b is not None
    assert (a.checkpoint["id"], a.checkpoint["channel_values"]) == (first, {"x": "first"})
    assert (b.checkpoint["id"], b.checkpoint["channel_values"]) == (second, {"x": "second"})
    assert saver.get_tuple({"configurable": {"thread_id": "k", "checkpoint_ns": "y:z"}}) is None


def test_all_keys_of_a_thread_share_one_hash_slot(saver: RedisSaver, client: redis.Redis) -> None:
    for thread_id in ["t1", "", "{odd}"]:
        cid = _put(saver, thread_id, ns="child:1")
        saver.put_writes(
            {
                "configurable": {
                    "thread_id": thread_id,
                    "checkpoint_ns": "child:1",
                    "checkpoint_id": cid,
                }
            },
            [("x", 1)],
            "task",
        )
        # writes stored before their checkpoint have a hash of their own (the others are
        # in the checkpoint's record)
        saver.put_writes(
            {
                "configurable": {
                    "thread_id": thread_id,
                    "checkpoint_ns": "child:1",
                    "checkpoint_id": "not stored yet",
                }
            },
            [("x", 1)],
            "task",
        )
        keys = keys_of(client, KeySchema(saver.prefix).thread_keys_pattern(thread_id))
        kinds = sorted({k.split(":")[1] for k in keys})
        assert kinds == ["blob", "cp", "dl", "idx", "th", "tv", "w", "wi"]
        assert len({key_slot(k.encode()) for k in keys}) == 1
    # and every key under the prefix belongs to one of those threads (no run_id: no global
    # metadata index entry with the default index_metadata), but for the threads-by-value
    # list of source "input", which they share
    assert [k for k in keys_of(client, f"{saver.prefix}:*") if ":mi:" in k] == []
    shared = [f"{saver.prefix}:tm:source:%22input%22"]
    assert keys_of(client, f"{saver.prefix}:tm:*") == shared
    assert len(data_keys(client, saver.prefix)) == 3 * 8 + 1  # and the registry P:mk


def test_remembered_refs_and_metadata_forms_keep_equal_values_of_other_types_apart() -> None:
    """blob_ref and the canonical form of scalars are remembered (a chat repeats them); keys
    that compare equal across types (1 == 1.0 == True) must not share an entry."""

    def serialized(value: object) -> bytes:
        raise AssertionError(f"a scalar is not serialized: {value!r}")

    for order in ([1, 1.0, True, "1"], ["1", True, 1.0, 1]):
        refs = {repr(v): blob_ref("c", v) for v in order}
        assert refs == {"1": "c:1", "1.0": "c:1.0", "True": "c:True", "'1'": "c:1"}
    for order in ([True, 1, False, 0], [1, True, 0, False]):
        forms = {repr(v): canonical(v, serialized) for v in order}
        assert forms == {"True": "true", "1": "1", "False": "false", "0": "0"}
    assert canonical("é", serialized) == canonical("é", serialized) == '"\\u00e9"'
    long_text = "x" * 1000  # (not remembered: the same form all the same)
    assert canonical(long_text, serialized) == f'"{long_text}"'
