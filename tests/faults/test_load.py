"""Load: 500 concurrent async graphs x 10 turns through a 50-connection pool, and the sync
saver from 32 OS threads; zero errors and every history complete."""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor

import pytest

from langgraph.checkpoint.rediskv import AsyncRedisSaver, RedisSaver

from ..conftest import new_prefix
from ..integration.test_ttl import build_chat, expected_messages

TURNS = 10


@pytest.mark.slow
async def test_500_concurrent_async_graphs_through_50_connections(server_url: str) -> None:
    async with AsyncRedisSaver(server_url, prefix=new_prefix(), max_connections=50) as saver:
        graph = build_chat(saver)

        async def conversation(n: int) -> None:
            config = {"configurable": {"thread_id": f"user-{n}"}}
            for i in range(TURNS):
                await graph.ainvoke({"messages": [f"user {i}"]}, config)

        results = await asyncio.gather(
            *(conversation(n) for n in range(500)), return_exceptions=True
        )
        assert [r for r in results if r is not None] == []
        for n in range(500):
            config = {"configurable": {"thread_id": f"user-{n}"}}
            state = await graph.aget_state(config)
            assert state.values == {"profile": "likes tea", "messages": expected_messages(TURNS)}
            history = [s async for s in graph.aget_state_history(config)]
            assert [s.metadata["step"] for s in history] == list(range(3 * TURNS - 2, -2, -1))
        assert await saver.acheck_invariants() == []
        assert saver.client.connection_pool.max_connections == 50


@pytest.mark.slow
def test_sync_saver_from_32_threads(server_url: str) -> None:
    with RedisSaver(server_url, prefix=new_prefix(), max_connections=16) as saver:
        graph = build_chat(saver)

        def conversation(n: int) -> None:
            config = {"configurable": {"thread_id": f"user-{n}"}}
            for i in range(TURNS):
                graph.invoke({"messages": [f"user {i}"]}, config)

        with ThreadPoolExecutor(32) as pool:
            list(pool.map(conversation, range(64)))
        for n in range(64):
            config = {"configurable": {"thread_id": f"user-{n}"}}
            assert graph.get_state(config).values == {
                "profile": "likes tea",
                "messages": expected_messages(TURNS),
            }
            assert len(list(graph.get_state_history(config))) == 3 * TURNS
        assert saver.check_invariants() == []
