"""The same saver on a real 3-primary cluster started by the fixtures (no Docker): the
conformance suite and every real-graph test of the core issue run again here, plus the
spread of threads over the nodes and a node restart mid-run."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest
import redis
from redis.cluster import RedisCluster

from langgraph.checkpoint.rediskv import AsyncRedisSaver, RedisSaver, RedisUnavailableError
from langgraph.checkpoint.rediskv.keys import KeySchema

from .conftest import LocalCluster, SlotMove, new_prefix, slot_moving
from .test_conformance import test_conformance_all_capabilities  # noqa: F401
from .test_contract import cfg, chain, thread_by_thread
from .test_graphs import *  # noqa: F403  (every real-graph test, collected again here)
from .test_ttl import build_chat, expected_messages, turn


@pytest.fixture(scope="module")
def server_url(local_cluster: LocalCluster) -> str:
    return local_cluster.url


@pytest.fixture
def saver_options() -> dict[str, Any]:
    return {"cluster": True}


@pytest.fixture
def client(server_url: str) -> Iterator[RedisCluster]:
    c = RedisCluster.from_url(server_url)
    yield c
    c.close()


def test_threads_spread_over_every_node(server_url: str, local_cluster: LocalCluster) -> None:
    prefix = new_prefix()
    with RedisSaver(server_url, cluster=True, prefix=prefix) as saver:
        for i in range(1000):
            chain(saver, f"user-{i}", [{"step": 0}])
        share = []
        for node in local_cluster.nodes:
            with redis.Redis(port=node.port) as direct:
                share.append(sum(1 for _ in direct.scan_iter(match=f"{prefix}:*", count=1000)))
        total = sum(share)
        print(f"\nkeys per node: {share} of {total}")
        # th, idx, cp and the blob of each thread, and the registry (P:mk: no metadata value
        # of these needs a threads-by-value list)
        assert total == 1000 * 4 + 1
        assert all(0.20 <= n / total <= 0.50 for n in share), share
        assert len(list(saver.list(None))) == 1000
        assert saver.check_invariants() == []
        saver.prune([f"user-{i}" for i in range(1000)], strategy="delete_all")
        assert list(saver.list(None)) == []


def test_list_across_shards_matches_a_single_server(server_url: str, client: RedisCluster) -> None:
    with RedisSaver(
        server_url, cluster=True, prefix=new_prefix(), index_metadata=["user_id"]
    ) as saver:
        assert saver.indexed_metadata == ()  # a global index would cross slots: none here
        ids = []
        for i in range(12):
            ids += chain(
                saver, f"t{i}", [{"user_id": "u" if i % 3 else "v", "step": s} for s in range(3)]
            )
        newest_first = sorted(ids, reverse=True)
        assert thread_by_thread(saver.list(None)) == newest_first
        for limit in (1, 5, 35, 36, 37):
            got = [t.checkpoint["id"] for t in saver.list(None, limit=limit)]
            assert got == newest_first[:limit]
        before = cfg("x", checkpoint_id=newest_first[10])
        assert [
            t.checkpoint["id"] for t in saver.list(None, before=before, limit=3)
        ] == newest_first[11:14]
        v_ids = thread_by_thread(saver.list(None, filter={"user_id": "v"}))
        assert v_ids == sorted([i for n, i in enumerate(ids) if (n // 3) % 3 == 0], reverse=True)
        assert list(client.scan_iter(match=f"{saver.prefix}:mi:*")) == []


def test_a_node_restart_mid_run_loses_nothing(server_url: str, local_cluster: LocalCluster) -> None:
    prefix = new_prefix()
    threads = [f"chat-{i}" for i in range(6)]  # spread over the three nodes
    with RedisSaver(server_url, cluster=True, prefix=prefix, retries=5) as saver:
        graph = build_chat(saver)
        for i in range(5):
            for thread in threads:
                turn(graph, thread, f"user {i}")
        keys = KeySchema(prefix)
        victim = next(n for n in local_cluster.nodes if n.port != local_cluster.nodes[0].port)
        victim.kill()
        victim.start()  # same port, same data directory: AOF and nodes.conf come back
        local_cluster.wait_until_healthy()
        for i in range(5, 10):
            for thread in threads:
                turn(graph, thread, f"user {i}")
        for thread in threads:
            state = graph.get_state({"configurable": {"thread_id": thread}})
            assert state.values == {"profile": "likes tea", "messages": expected_messages(10)}
        assert saver.check_invariants() == []
        assert keys.prefix == prefix


async def test_async_saver_on_the_cluster_with_gather(server_url: str) -> None:
    async with AsyncRedisSaver(server_url, cluster=True, prefix=new_prefix()) as saver:
        graph = build_chat(saver)

        async def talk(n: int) -> None:
            for i in range(3):
                await graph.ainvoke(
                    {"messages": [f"user {i}"]}, {"configurable": {"thread_id": f"a{n}"}}
                )

        await asyncio.gather(*(talk(n) for n in range(30)))
        for n in range(30):
            state = await graph.aget_state({"configurable": {"thread_id": f"a{n}"}})
            assert state.values == {"profile": "likes tea", "messages": expected_messages(3)}
        assert await saver.acheck_invariants() == []


# -- a slot move under a thread (resharding, scaling): calls wait, nothing is half-written --
def slot_of(client: RedisCluster, key: str) -> int:
    return int(client.execute_command("CLUSTER", "KEYSLOT", key))


@pytest.mark.parametrize("moved_before_the_call", [0, 5])
def test_calls_during_a_slot_move_wait_and_write_whole(
    server_url: str, local_cluster: LocalCluster, client: RedisCluster, moved_before_the_call: int
) -> None:
    """Before the fix every call on a migrating slot failed with "Script attempted to access
    a non local key", and a delete or prune that got that error midway stayed half done."""
    prefix = new_prefix()
    keys = KeySchema(prefix)
    with RedisSaver(server_url, cluster=True, prefix=prefix) as saver:
        graph = build_chat(saver)
        for i in range(3):
            turn(graph, "mover", f"user {i}")
        turn(graph, "doomed", "user 0")
        mover_slot = slot_of(client, keys.thread(keys.tag("mover")))
        with slot_moving(local_cluster, mover_slot, moved_before_the_call, 1.0):
            turn(graph, "mover", "user 3")  # waits for the move, then writes whole
        state = graph.get_state({"configurable": {"thread_id": "mover"}})
        assert state.values == {"profile": "likes tea", "messages": expected_messages(4)}
        assert saver.check_invariants() == []

        # a delete while the doomed thread's slot moves: all of it goes, or (before the
        # move ends) none of it
        doomed_slot = slot_of(client, keys.thread(keys.tag("doomed")))
        with slot_moving(local_cluster, doomed_slot, moved_before_the_call, 1.0):
            saver.delete_thread("doomed")
        assert list(client.scan_iter(match=keys.thread_keys_pattern("doomed"))) == []
        assert saver.check_invariants() == []


@pytest.mark.parametrize("moved_before_the_call", [0, 5])
def test_a_batch_over_threads_during_a_slot_move_waits_for_the_moving_thread(
    server_url: str, local_cluster: LocalCluster, client: RedisCluster, moved_before_the_call: int
) -> None:
    """A batch (the threads of a list page, of a prune) goes out as one pipeline; the call
    whose slot is moving fails in it (TRYAGAIN, ASK) and goes again alone, which waits the
    move out."""
    prefix = new_prefix()
    keys = KeySchema(prefix)
    with RedisSaver(server_url, cluster=True, prefix=prefix) as saver:
        ids = {f"t{i}": chain(saver, f"t{i}", [{"user_id": "u"}] * 3) for i in range(8)}
        slot = slot_of(client, keys.thread(keys.tag("t3")))
        with slot_moving(local_cluster, slot, moved_before_the_call, 1.0):
            got = thread_by_thread(saver.list(None, filter={"user_id": "u"}))
        assert got == sorted((i for chain_ids in ids.values() for i in chain_ids), reverse=True)
        with slot_moving(local_cluster, slot, moved_before_the_call, 1.0):
            saver.prune(list(ids), strategy="keep_latest")
        assert thread_by_thread(saver.list(None)) == sorted(
            (chain_ids[-1] for chain_ids in ids.values()), reverse=True
        )
        assert saver.check_invariants() == []


def test_a_slot_move_that_does_not_end_fails_clearly_and_writes_nothing(
    server_url: str, local_cluster: LocalCluster, client: RedisCluster
) -> None:
    prefix = new_prefix()
    keys = KeySchema(prefix)
    with RedisSaver(server_url, cluster=True, prefix=prefix, slot_move_wait=1.0) as saver:
        ids = chain(saver, "stuck", [{"step": i} for i in range(3)])
        move = SlotMove(local_cluster, slot_of(client, keys.thread(keys.tag("stuck"))))
        try:
            move.begin()
            move.move_keys(2)
            with pytest.raises(RedisUnavailableError, match=r"slot .* is being moved"):
                saver.prune(["stuck"], strategy="keep_latest")
            move.finish()
        finally:
            move.close()
        assert [t.checkpoint["id"] for t in saver.list(cfg("stuck"))] == ids[::-1]
        assert saver.check_invariants() == []
