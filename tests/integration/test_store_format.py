"""The stored format of a prefix (P:fmt): written once, read once per saver, and a prefix
whose format needs a later release is refused with an error that names both releases,
before anything is read or written."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import redis
from redis.crc import key_slot

from langgraph.checkpoint.rediskv import AsyncRedisSaver, RedisSaver, StoreFormatError
from langgraph.checkpoint.rediskv import __version__ as version
from langgraph.checkpoint.rediskv.keys import KeySchema
from langgraph.checkpoint.rediskv.storeformat import RELEASE, WRITES_FORMAT, release_tuple

from ..conftest import snapshot
from .test_contract import cfg, chain

ROOT = Path(__file__).resolve().parents[2]


def test_the_release_is_the_packages_version() -> None:
    pyproject = (ROOT / "pyproject.toml").read_text()
    versions = re.findall(r'^version = "(.*)"$', pyproject, re.MULTILINE)
    assert versions == [RELEASE] and version == RELEASE == "0.2.0"
    assert WRITES_FORMAT == "0.1.0"
    assert release_tuple("0.10.1") == (0, 10, 1)
    changelog = (ROOT / "CHANGELOG.md").read_text()
    assert f"## [{RELEASE}]" in changelog and "## [0.1.0]" in changelog


def test_the_first_call_reads_the_format_and_later_calls_do_not_ask(
    server_url: str, prefix: str, client: redis.Redis
) -> None:
    with RedisSaver(server_url, prefix=prefix) as saver:
        sent: list[str] = []
        send = saver._send

        def counting(request: Any) -> Any:
            sent.append(getattr(request, "name", type(request).__name__))
            return send(request)

        saver._send = counting  # type: ignore[method-assign]
        assert saver.get_tuple(cfg("t")) is None  # a read on an empty prefix
        # (a read that finds no key of its thread asks the registry of live threads in its
        # own script on a standalone server)
        assert sent == ["store_format", "get_tuple"]
        ids = chain(saver, "t", [{"step": 0}, {"step": 1}])
        assert [t.checkpoint["id"] for t in saver.list(cfg("t"))] == ids[::-1]
        assert sent.count("store_format") == 1
        # this release writes 0.1.0's format, which needs no mark
        assert client.exists(KeySchema(prefix).format_key()) == 0
        saver.delete_thread("t")
    # a format this release reads (its own, or an earlier one) is read and left as it is
    for readable in (b"0.1.0", b"0.2.0"):
        client.set(KeySchema(prefix).format_key(), readable)
        with RedisSaver(server_url, prefix=prefix) as saver:
            assert chain(saver, "t", [{"step": 0}]) == [saver.get_tuple(cfg("t")).checkpoint["id"]]  # type: ignore[union-attr]
            saver.delete_thread("t")
        assert client.get(KeySchema(prefix).format_key()) == readable


def test_the_format_key_is_in_the_slot_of_the_registry() -> None:
    """On a cluster a saver's first call reads the format: from the node of the registry
    P:mk, which its first put writes, not from another node it would also depend on
    (test_cluster's primary down or hung: the format's node was down, every call failed)."""
    keys = KeySchema("app")
    assert keys.format_key() == "app:fmt:{app:mk}"
    assert key_slot(keys.format_key().encode()) == key_slot(b"app:mk")


CALLS = {
    "get_tuple": lambda s: s.get_tuple(cfg("t")),
    "list": lambda s: list(s.list(cfg("t"))),
    "put": lambda s: chain(s, "t", [{"step": 2}]),
    "put_writes": lambda s: s.put_writes(cfg("t", checkpoint_id="x"), [("a", 1)], "task"),
    "delete_thread": lambda s: s.delete_thread("t"),
    "copy_thread": lambda s: s.copy_thread("t", "copy"),
}


@pytest.mark.parametrize("call", CALLS.values(), ids=CALLS.keys())
def test_a_prefix_of_a_later_format_is_refused_and_left_as_it_is(
    server_url: str, prefix: str, client: redis.Redis, call: Any
) -> None:
    with RedisSaver(server_url, prefix=prefix) as saver:
        chain(saver, "t", [{"step": 0}, {"step": 1}])
    client.set(
        KeySchema(prefix).format_key(), b"0.3.0"
    )  # as a release 0.3.0 that changed the format
    before = snapshot(client, f"{prefix}:*")
    message = (
        f"the prefix '{prefix}' holds checkpoints in a format that needs "
        f"langgraph-checkpoint-rediskv 0.3.0 or later (key {prefix}:fmt:{{{prefix}:mk}}); "
        "this is 0.2.0, which could misread them"
    )
    with RedisSaver(server_url, prefix=prefix) as saver:
        for _ in range(2):  # and again: a refused check is not taken as passed
            with pytest.raises(StoreFormatError, match=re.escape(message)):
                call(saver)
    assert snapshot(client, f"{prefix}:*") == before


async def test_a_prefix_of_a_later_format_is_refused_async(
    server_url: str, prefix: str, client: redis.Redis
) -> None:
    client.set(KeySchema(prefix).format_key(), b"1.0.0")
    async with AsyncRedisSaver(server_url, prefix=prefix) as saver:
        with pytest.raises(
            StoreFormatError, match=re.escape("needs langgraph-checkpoint-rediskv 1.0.0 or later")
        ):
            await saver.aget_tuple(cfg("t"))
        with pytest.raises(StoreFormatError, match=re.escape("this is 0.2.0")):
            [t async for t in saver.alist(cfg("t"))]
    assert client.get(KeySchema(prefix).format_key()) == b"1.0.0"
    assert client.exists(f"{prefix}:mk") == 0


def test_a_format_that_is_not_a_release_is_named(
    server_url: str, prefix: str, client: redis.Redis
) -> None:
    client.set(KeySchema(prefix).format_key(), b"v2")
    with (
        RedisSaver(server_url, prefix=prefix) as saver,
        pytest.raises(
            StoreFormatError,
            match=re.escape(
                f"the prefix '{prefix}' has a stored format 'v2' (key {prefix}:fmt:{{{prefix}:mk}})"
            ),
        ),
    ):
        saver.get_tuple(cfg("t"))
