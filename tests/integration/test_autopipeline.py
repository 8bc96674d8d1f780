"""Auto-pipelining in AsyncRedisSaver: concurrent calls share sends, each keeps its own
reply and error, and a script the server lost is loaded again."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest
import redis

from langgraph.checkpoint.rediskv import AsyncRedisSaver, ValueTooLargeError
from langgraph.checkpoint.rediskv.keys import KeySchema

from ..conftest import PrivateServer, RoundTrips, new_prefix
from .test_contract import cfg, make_checkpoint


async def put_one(saver: AsyncRedisSaver, thread_id: str, value: object) -> str:
    version = saver.get_next_version(None, None)
    checkpoint = make_checkpoint({"v": value}, {"v": version})
    await saver.aput(cfg(thread_id), checkpoint, {"step": 0}, {"v": version})
    return checkpoint["id"]


async def test_concurrent_calls_share_sends(server_url: str, round_trips: RoundTrips) -> None:
    async with AsyncRedisSaver(server_url, prefix=new_prefix()) as saver:
        await put_one(saver, "warm", 0)  # connection and script loading
        round_trips.reset()
        ids = await asyncio.gather(*(put_one(saver, f"t{i}", i) for i in range(100)))
        sends = round_trips.count
        tuples = await asyncio.gather(*(saver.aget_tuple(cfg(f"t{i}")) for i in range(100)))
    assert sends < 50  # 100 calls, far fewer sends
    assert [t.checkpoint["id"] for t in tuples if t] == ids
    assert [t.checkpoint["channel_values"] for t in tuples if t] == [{"v": i} for i in range(100)]


async def test_each_call_keeps_its_own_error(server_url: str, client: redis.Redis) -> None:
    prefix = new_prefix()
    keys = KeySchema(prefix)
    for i in range(0, 40, 2):  # a key of the wrong type makes the script fail on these threads
        client.set(keys.thread(keys.tag(f"t{i}")), "not a set")
    async with AsyncRedisSaver(server_url, prefix=prefix) as saver:
        await put_one(saver, "warm", 0)
        results = await asyncio.gather(
            *(put_one(saver, f"t{i}", i) for i in range(40)), return_exceptions=True
        )
        assert all(isinstance(r, redis.exceptions.ResponseError) for r in results[0::2])
        assert all("WRONGTYPE" in str(r) for r in results[0::2])
        assert all(isinstance(r, str) for r in results[1::2])
        for i in range(1, 40, 2):
            tup = await saver.aget_tuple(cfg(f"t{i}"))
            assert tup is not None and tup.checkpoint["channel_values"] == {"v": i}


async def test_a_flushed_script_is_loaded_again_inside_a_pipeline(own_server_url: str) -> None:
    admin = redis.Redis.from_url(own_server_url)
    async with AsyncRedisSaver(own_server_url, prefix=new_prefix()) as saver:
        await put_one(saver, "warm", 0)
        for round_ in range(3):
            admin.script_flush()
            ids = await asyncio.gather(*(put_one(saver, f"r{round_}-{i}", i) for i in range(30)))
            got = await asyncio.gather(
                *(saver.aget_tuple(cfg(f"r{round_}-{i}")) for i in range(30))
            )
            assert [t.checkpoint["id"] for t in got if t] == ids
    admin.close()


async def test_a_cancelled_caller_does_not_disturb_the_others(server_url: str) -> None:
    async with AsyncRedisSaver(server_url, prefix=new_prefix()) as saver:
        tasks = [asyncio.create_task(put_one(saver, f"c{i}", i)) for i in range(40)]
        tasks[5].cancel()
        tasks[25].cancel()
        results = await asyncio.gather(*tasks, return_exceptions=True)
        assert [i for i, r in enumerate(results) if isinstance(r, asyncio.CancelledError)] == [
            5,
            25,
        ]
        for i, r in enumerate(results):
            if isinstance(r, str):
                tup = await saver.aget_tuple(cfg(f"c{i}"))
                assert tup is not None and tup.checkpoint["id"] == r


@pytest.mark.parametrize("auto_pipeline", [True, False])
async def test_both_modes_store_the_same(server_url: str, auto_pipeline: bool) -> None:
    async with AsyncRedisSaver(
        server_url, prefix=new_prefix(), auto_pipeline=auto_pipeline
    ) as saver:
        await asyncio.gather(*(put_one(saver, "same", i) for i in range(10)))
        listed = [t.checkpoint["channel_values"]["v"] async for t in saver.alist(cfg("same"))]
    assert sorted(listed) == list(range(10))


@pytest.mark.parametrize("big", [2_000_000, 20_000_000])
async def test_an_oversized_value_fails_only_its_own_call(tmp_path: Path, big: int) -> None:
    """Redis drops the connection on a value over proto-max-bulk-len: that must not fail the
    other calls that share a pipeline with it, and the caller learns what was wrong."""
    server = PrivateServer(tmp_path, **{"proto-max-bulk-len": "1mb"}).start()
    try:
        async with AsyncRedisSaver(server.url, prefix="app") as saver:
            await put_one(saver, "warm", 0)
            results = await asyncio.gather(
                *(put_one(saver, f"t{i}", f"message {i}") for i in range(14)),
                put_one(saver, "huge", os.urandom(big)),  # incompressible
                *(put_one(saver, f"t{i}", f"message {i}") for i in range(14, 29)),
                return_exceptions=True,
            )
            errors = [r for r in results if isinstance(r, BaseException)]
            assert [type(e) for e in errors] == [ValueTooLargeError]
            # its stored form: "u:b:<mark>;bytes\0" (a value that may serve as a base) and it
            stored = len("u:b:" + "0" * 32 + ";bytes\0") + big
            assert f"a serialized value of {stored} bytes is larger" in str(errors[0])
            tuples = await asyncio.gather(*(saver.aget_tuple(cfg(f"t{i}")) for i in range(29)))
            assert [t.checkpoint["channel_values"] for t in tuples if t] == [
                {"v": f"message {i}"} for i in range(29)
            ]
            assert await saver.aget_tuple(cfg("huge")) is None
            assert await saver.acheck_invariants() == []
    finally:
        server.stop()
