"""Security: a least-privilege ACL user, TLS with a self-signed certificate, encryption at
rest with LangGraph's EncryptedSerializer, and no unpickling by default."""

from __future__ import annotations

import pickle
import shutil
import subprocess
import time
from pathlib import Path

import pytest
import redis
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.serde.encrypted import EncryptedSerializer

from langgraph.checkpoint.rediskv import RedisSaver
from langgraph.checkpoint.rediskv.keys import KeySchema

from .conftest import PrivateServer, _free_port, keys_of
from .test_contract import cfg, make_checkpoint
from .test_ttl import build_chat, expected_messages, turn

# Everything the saver sends: the scripts (EVALSHA; SCRIPT LOAD after a NOSCRIPT; SCRIPT EXISTS
# before a pipeline of scripts), SCAN for operations across threads, and the data commands
# the scripts run. The README lists these.
SAVER_COMMANDS = [
    "evalsha", "script|load", "script|exists", "scan",
    "get", "mget", "set", "del", "unlink", "exists", "expire", "persist", "pttl",
    "hset", "hsetnx", "hget", "hmget", "hgetall", "hvals",
    "sadd", "srem", "smembers", "sismember", "scard", "srandmember",
    "zadd", "zrem", "zrange", "zrevrange", "zrevrangebylex", "zscore",
]  # fmt: skip


def test_saver_works_as_an_acl_user_limited_to_its_prefix(private_server: PrivateServer) -> None:
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
        assert saver.check_invariants() == []
        assert graph.get_state({"configurable": {"thread_id": "t"}}).values[
            "messages"
        ] == expected_messages(3)
        saver.delete_thread("t")
        with pytest.raises(redis.exceptions.NoPermissionError):
            saver.client.get("other:secret")
        with pytest.raises(redis.exceptions.NoPermissionError):
            saver.client.flushdb()
    assert admin.get("other:secret") == b"not yours"
    admin.close()


def _self_signed(directory: Path) -> tuple[Path, Path]:
    cert, key = directory / "cert.pem", directory / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
         "-subj", "/CN=localhost", "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1",
         "-keyout", str(key), "-out", str(cert)],
        check=True, capture_output=True,
    )  # fmt: skip
    return cert, key


def test_rediss_with_a_self_signed_certificate(tmp_path: Path) -> None:
    if shutil.which("openssl") is None:
        pytest.skip("openssl is not installed: cannot make a certificate")
    cert, key = _self_signed(tmp_path)
    # the machine's redis-server where there is one (Debian builds it with TLS), else the
    # embedded Valkey binary
    binary = shutil.which("redis-server") or PrivateServer(tmp_path).binary
    tls_port = _free_port()
    args = [
        str(binary), "--port", "0", "--bind", "127.0.0.1", "--dir", str(tmp_path), "--save", "",
        "--tls-port", str(tls_port), "--tls-cert-file", str(cert), "--tls-key-file", str(key),
        "--tls-ca-cert-file", str(cert), "--tls-auth-clients", "no",
    ]  # fmt: skip
    process = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        url = f"rediss://127.0.0.1:{tls_port}/0"
        deadline = time.monotonic() + 10
        while True:
            if process.poll() is not None:
                output = process.stdout.read().decode() if process.stdout else ""
                pytest.skip(f"{binary} has no TLS support: {output.strip()[-200:]}")
            try:
                with redis.Redis.from_url(url, ssl_ca_certs=str(cert)) as probe:
                    probe.ping()
                break
            except redis.exceptions.ConnectionError:
                assert time.monotonic() < deadline, "TLS server did not come up"
                time.sleep(0.1)
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


def test_encrypted_serializer_round_trips_and_nothing_is_stored_in_clear(
    server_url: str, prefix: str, client: redis.Redis
) -> None:
    serde = EncryptedSerializer.from_pycryptodome_aes(key=b"0123456789abcdef0123456789abcdef")
    with RedisSaver(server_url, prefix=prefix, serde=serde) as saver:
        graph = build_chat(saver)
        turn(graph, "t", "very private words")
        state = graph.get_state({"configurable": {"thread_id": "t"}})
    assert state.values == {"profile": "likes tea", "messages": ["very private words", "bot 1"]}
    stored = b"".join(
        client.get(k)
        if client.type(k) == b"string"
        else b"".join(b"".join(kv) for kv in client.hgetall(k).items())
        for k in keys_of(client, f"{prefix}:*")
        if client.type(k) in (b"string", b"hash")
    )
    assert b"very private words" not in stored and b"likes tea" not in stored
    assert b"msgpack+aes" in stored
    with (
        RedisSaver(server_url, prefix=prefix) as without_key,
        pytest.raises(Exception, match="aes"),
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
