"""Round trips per operation (a pipeline counts once): put 1, put_writes 1, get_tuple 1,
list of one thread with a limit up to 100: 1. And SCRIPT FLUSH is invisible to the caller."""

from __future__ import annotations

from typing import Any

import redis

from langgraph.checkpoint.rediskv import AsyncRedisSaver, RedisSaver

from ..conftest import RoundTrips, new_prefix
from .test_contract import cfg, chain, make_checkpoint


def test_sync_round_trips(saver: RedisSaver, round_trips: RoundTrips) -> None:
    ids = chain(saver, "t", [{"step": i, "user_id": "u" if i % 2 else "v"} for i in range(150)])
    counts: dict[str, int] = {}

    def measure(name: str, call: Any) -> Any:
        round_trips.reset()
        result = call()
        counts[name] = round_trips.count
        return result

    def scenario() -> tuple[Any, ...]:
        version = saver.get_next_version(None, None)
        checkpoint = make_checkpoint({"n": 1, "m": [1, 2]}, {"n": version, "m": version})
        parent = cfg("t", checkpoint_id=ids[-1])
        measure(
            "put",
            lambda: saver.put(parent, checkpoint, {"step": 150}, {"n": version, "m": version}),
        )
        own = cfg("t", checkpoint_id=checkpoint["id"])
        measure("put_writes", lambda: saver.put_writes(own, [("n", 2), ("m", 3), ("x", 4)], "task"))
        latest = measure("get_tuple latest", lambda: saver.get_tuple(cfg("t")))
        by_id = measure("get_tuple by id", lambda: saver.get_tuple(cfg("t", checkpoint_id=ids[10])))
        page = measure("list limit=100", lambda: list(saver.list(cfg("t"), limit=100)))
        filtered = measure(
            "list limit=10 filter",
            lambda: list(saver.list(cfg("t"), filter={"user_id": "u"}, limit=10)),
        )
        measure("list limit=150 (two pages)", lambda: list(saver.list(cfg("t"), limit=150)))
        return latest, by_id, page, filtered

    scenario()  # first pass: scripts get loaded (EVALSHA, NOSCRIPT, SCRIPT LOAD, EVALSHA)
    latest, by_id, page, filtered = scenario()

    assert counts == {
        "put": 1,
        "put_writes": 1,
        "get_tuple latest": 1,
        "get_tuple by id": 1,
        "list limit=100": 1,
        "list limit=10 filter": 1,
        "list limit=150 (two pages)": 2,
    }
    assert latest is not None and len(latest.pending_writes or []) == 3
    assert latest.parent_config == cfg("t", checkpoint_id=ids[-1])
    assert by_id is not None and by_id.metadata["step"] == 10
    assert len(page) == 100 and len(filtered) == 10
    assert all(t.metadata["user_id"] == "u" for t in filtered)


async def test_async_round_trips(
    async_saver: AsyncRedisSaver, server_url: str, round_trips: RoundTrips
) -> None:
    with RedisSaver(server_url, prefix=async_saver.prefix) as sync_saver:
        ids = chain(sync_saver, "t", [{"step": i} for i in range(120)])
    for _ in range(2):  # the first pass loads the scripts; the second is measured
        counts, latest, page, checkpoint = await _async_scenario(async_saver, ids, round_trips)
    assert counts == {"aput": 1, "aput_writes": 1, "aget_tuple": 1, "alist limit=100": 1}
    assert latest is not None and latest.pending_writes == [("task", "n", 2)]
    assert len(page) == 100 and page[0].checkpoint["id"] == checkpoint["id"]


async def _async_scenario(
    async_saver: AsyncRedisSaver, ids: list[str], round_trips: RoundTrips
) -> Any:
    version = async_saver.get_next_version(None, None)
    checkpoint = make_checkpoint({"n": 1}, {"n": version})
    counts = {}
    round_trips.reset()
    await async_saver.aput(
        cfg("t", checkpoint_id=ids[-1]), checkpoint, {"step": 120}, {"n": version}
    )
    counts["aput"] = round_trips.count
    round_trips.reset()
    await async_saver.aput_writes(cfg("t", checkpoint_id=checkpoint["id"]), [("n", 2)], "task")
    counts["aput_writes"] = round_trips.count
    round_trips.reset()
    latest = await async_saver.aget_tuple(cfg("t"))
    counts["aget_tuple"] = round_trips.count
    round_trips.reset()
    page = [t async for t in async_saver.alist(cfg("t"), limit=100)]
    counts["alist limit=100"] = round_trips.count
    return counts, latest, page, checkpoint


def test_script_flush_is_invisible_to_the_caller(own_server_url: str) -> None:
    admin = redis.Redis.from_url(own_server_url)
    with RedisSaver(own_server_url, prefix=new_prefix()) as saver:
        ids = chain(saver, "t", [{"step": 0}])
        admin.script_flush()
        ids += chain(saver, "t", [{"step": 1}])  # NOSCRIPT: redis-py loads the script again
        admin.script_flush()
        tup = saver.get_tuple(cfg("t"))
        admin.script_flush()
        assert [t.checkpoint["id"] for t in saver.list(cfg("t"))] == ids[::-1]
    assert tup is not None and tup.checkpoint["id"] == ids[-1]
    admin.close()


async def test_script_flush_is_invisible_to_the_async_caller(own_server_url: str) -> None:
    admin = redis.Redis.from_url(own_server_url)
    async with AsyncRedisSaver(own_server_url, prefix=new_prefix()) as saver:
        admin.script_flush()
        version = saver.get_next_version(None, None)
        checkpoint = make_checkpoint({"n": 1}, {"n": version})
        await saver.aput(cfg("t"), checkpoint, {"step": 0}, {"n": version})
        admin.script_flush()
        tup = await saver.aget_tuple(cfg("t"))
    assert tup is not None and tup.checkpoint["channel_values"] == {"n": 1}
    admin.close()
