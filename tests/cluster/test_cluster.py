"""The same saver on a real 3-primary cluster started by the fixtures (no Docker): the
conformance suite and every real-graph test of the core issue run again here, plus the
spread of threads over the nodes and a node restart mid-run."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from redis.cluster import RedisCluster, key_slot
from redis.exceptions import RedisClusterException

from langgraph.checkpoint.rediskv import AsyncRedisSaver, RedisSaver, RedisUnavailableError
from langgraph.checkpoint.rediskv.core import Batch, ScriptCall
from langgraph.checkpoint.rediskv.functions import listed_libraries
from langgraph.checkpoint.rediskv.keys import KeySchema
from langgraph.checkpoint.rediskv.scripts import FUNCTION_OPS, function_library

from ..conftest import (
    LocalCluster,
    SlotMove,
    cluster_with_replica,
    new_prefix,
    slot_moving,
)
from ..e2e.test_graphs import *  # noqa: F403  (every real-graph test, collected again here)
from ..faults.test_eviction import policy_warning
from ..integration.test_conformance import test_conformance_all_capabilities  # noqa: F401
from ..integration.test_contract import cfg, chain, make_checkpoint, thread_by_thread
from ..integration.test_security import CLUSTER_COMMANDS, SAVER_COMMANDS
from ..integration.test_ttl import build_chat, expected_messages, turn


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
        # th, idx, dl (the deadline ledger), cp and the blob of each thread, and the registry
        # (P:mk: no metadata value of these needs a threads-by-value list)
        assert total == 1000 * 5 + 1
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
            # (the saver's own error, not wrapped again as "cannot reach Redis at ...")
            with pytest.raises(
                RedisUnavailableError, match=r"^the cluster slot of .* is being moved"
            ):
                saver.prune(["stuck"], strategy="keep_latest")
            move.finish()
        finally:
            move.close()
        assert [t.checkpoint["id"] for t in saver.list(cfg("stuck"))] == ids[::-1]
        assert saver.check_invariants() == []


# -- the function library on a cluster -----------------------------------------------------------

LIBRARY, LIBRARY_SOURCE, _ = function_library()


class NodeStats:
    """FCALL and COMMAND GETKEYS calls on each node of the cluster since the last take()."""

    def __init__(self, cluster: LocalCluster) -> None:
        self.admins = {node.port: redis.Redis(port=node.port) for node in cluster.nodes}
        self.seen = self._counts()

    def _counts(self) -> dict[int, tuple[int, int]]:
        counts = {}
        for port, admin in self.admins.items():
            stats = admin.info("commandstats")
            counts[port] = (
                int(stats.get("cmdstat_fcall", {}).get("calls", 0)),
                int(stats.get("cmdstat_command|getkeys", {}).get("calls", 0)),
            )
        return counts

    def take(self) -> dict[int, tuple[int, int]]:
        now = self._counts()
        delta = {p: (now[p][0] - self.seen[p][0], now[p][1] - self.seen[p][1]) for p in now}
        self.seen = now
        return delta

    def libraries(self) -> dict[int, str | None]:
        """This version's library on each node: its code, or None."""
        return {
            port: listed_libraries(admin.function_list(library=LIBRARY, withcode=True)).get(LIBRARY)
            for port, admin in self.admins.items()
        }

    def close(self) -> None:
        for admin in self.admins.values():
            admin.close()


@pytest.fixture
def node_stats(local_cluster: LocalCluster) -> Iterator[NodeStats]:
    stats = NodeStats(local_cluster)
    yield stats
    stats.close()


def count_scripts(saver: RedisSaver | AsyncRedisSaver) -> list[str]:
    """The names of the function operations the saver runs as scripts from now on."""
    ran: list[str] = []
    for name in FUNCTION_OPS:
        script = saver._scripts[name]

        def counted(*args: Any, _name: str = name, _script: Any = script, **kw: Any) -> Any:
            ran.append(_name)
            return _script(*args, **kw)

        saver._scripts[name] = counted  # type: ignore[assignment]
    return ran


def port_of(client: RedisCluster, key: str) -> int:
    return int(client.get_node_from_key(key).port)


def put_and_read(saver: RedisSaver, thread: str, step: int) -> None:
    version = saver.get_next_version(None, None)
    config = saver.put(cfg(thread), make_checkpoint({"v": step}, {"v": version}),
                       {"step": step, "user_id": "u"}, {"v": version})  # fmt: skip
    saver.put_writes(config, [("v", step + 1)], "task-1")
    got = saver.get_tuple(cfg(thread))
    assert got is not None and got.checkpoint["channel_values"] == {"v": step}
    assert got.pending_writes == [("task-1", "v", step + 1)]


def test_a_turn_runs_as_fcalls_on_the_primary_of_its_slot(
    server_url: str, client: RedisCluster, node_stats: NodeStats
) -> None:
    prefix = new_prefix()
    keys = KeySchema(prefix)
    threads = [f"t{i}" for i in range(9)]
    with RedisSaver(server_url, cluster=True, prefix=prefix) as saver:
        # the library checked, or loaded, on each primary before its first FCALL there; each
        # thread's first put puts it in the threads-by-value lists first (a batch of scripts)
        for thread in threads:
            put_and_read(saver, thread, 1)
        assert node_stats.libraries() == dict.fromkeys(node_stats.admins, LIBRARY_SOURCE)
        scripts = count_scripts(saver)
        node_stats.take()
        for thread in threads:
            put_and_read(saver, thread, 2)
            put_and_read(saver, thread, 3)
    # each put, put_writes and get_tuple one FCALL on the primary of its thread's slot, and
    # no COMMAND GETKEYS (which redis-py's cluster client sends for an FCALL it routes)
    expected = dict.fromkeys(node_stats.admins, (0, 0))
    for thread in threads:
        port = port_of(client, keys.thread(keys.tag(thread)))
        expected[port] = (expected[port][0] + 2 * 3, 0)
    assert node_stats.take() == expected
    assert scripts == []


def test_a_threads_first_put_asks_the_cluster_for_no_command_keys(
    server_url: str, node_stats: NodeStats
) -> None:
    """A thread's first put enters it in the threads-by-value lists in a pipeline of
    scripts, each sent to the primary of its slot: redis-py's pipeline asked each node
    COMMAND GETKEYS for every EVALSHA it held (4 per first put), to choose a routing policy."""
    prefix = new_prefix()
    with RedisSaver(server_url, cluster=True, prefix=prefix) as saver:
        put_and_read(saver, "warm", 1)  # (the library loaded on each primary)
        node_stats.take()
        for i in range(6):
            put_and_read(saver, f"t{i}", 1)
        assert sum(getkeys for _, getkeys in node_stats.take().values()) == 0

        async def first_puts() -> None:
            async with AsyncRedisSaver(server_url, cluster=True, prefix=prefix) as aio_saver:
                for i in range(6):
                    version = aio_saver.get_next_version(None, None)
                    await aio_saver.aput(cfg(f"a{i}"), make_checkpoint({"v": 1}, {"v": version}),
                                         {"step": 1, "user_id": "u"}, {"v": version})  # fmt: skip

        asyncio.run(first_puts())
        assert sum(getkeys for _, getkeys in node_stats.take().values()) == 0
        assert saver.check_invariants() == []


async def test_the_async_saver_runs_a_turn_as_fcalls_on_the_primary_of_its_slot(
    server_url: str, client: RedisCluster, node_stats: NodeStats
) -> None:
    prefix = new_prefix()
    keys = KeySchema(prefix)
    threads = [f"t{i}" for i in range(9)]
    async with AsyncRedisSaver(server_url, cluster=True, prefix=prefix) as saver:

        async def turn_of(thread: str) -> None:
            version = saver.get_next_version(None, None)
            config = await saver.aput(cfg(thread), make_checkpoint({"v": 1}, {"v": version}),
                                      {"user_id": "u"}, {"v": version})  # fmt: skip
            await saver.aput_writes(config, [("v", 2)], "task-1")
            got = await saver.aget_tuple(cfg(thread))
            assert got is not None and got.pending_writes == [("task-1", "v", 2)]

        await asyncio.gather(*(turn_of(thread) for thread in threads))  # (see the sync test)
        scripts = count_scripts(saver)
        node_stats.take()
        await asyncio.gather(*(turn_of(thread) for thread in threads))
    expected = dict.fromkeys(node_stats.admins, (0, 0))
    for thread in threads:
        port = port_of(client, keys.thread(keys.tag(thread)))
        expected[port] = (expected[port][0] + 3, 0)
    assert node_stats.take() == expected
    assert scripts == []


def test_a_primary_that_lost_the_library_gets_it_again(
    server_url: str, client: RedisCluster, node_stats: NodeStats
) -> None:
    prefix = new_prefix()
    keys = KeySchema(prefix)
    with RedisSaver(server_url, cluster=True, prefix=prefix) as saver:
        put_and_read(saver, "a", 1)
        port = port_of(client, keys.thread(keys.tag("a")))
        # the primary restarted empty, or someone ran FUNCTION DELETE there
        node_stats.admins[port].function_delete(LIBRARY)
        scripts = count_scripts(saver)
        node_stats.take()
        put_and_read(saver, "a", 2)
        assert node_stats.libraries() == dict.fromkeys(node_stats.admins, LIBRARY_SOURCE)
        # the put found its function gone (an FCALL refused), loaded the library there and
        # called it again; then put_writes and get_tuple
        assert node_stats.take()[port] == (1 + 3, 0)
        assert scripts == []
        assert saver.check_invariants() == []


def test_other_code_under_the_librarys_name_on_one_primary_turns_functions_off(
    server_url: str, client: RedisCluster, node_stats: NodeStats, caplog: pytest.LogCaptureFixture
) -> None:
    prefix = new_prefix()
    keys = KeySchema(prefix)
    port = port_of(client, keys.thread(keys.tag("a")))
    other = LIBRARY_SOURCE.replace("-- The key schema:", "-- changed")
    node_stats.admins[port].function_load(other, replace=True)
    try:
        with RedisSaver(server_url, cluster=True, prefix=prefix) as saver:
            scripts = count_scripts(saver)
            with caplog.at_level("WARNING", logger="langgraph.checkpoint.rediskv.functions"):
                put_and_read(saver, "a", 1)
            # (a thread's first put runs twice: the lists take the thread first)
            assert scripts == ["put_checkpoint", "put_checkpoint", "put_writes", "get_tuple"]
            assert [r.getMessage() for r in caplog.records] == [
                f"the Redis function library {LIBRARY} on the server is not this saver's code: "
                f"the saver runs its scripts instead (delete the library, FUNCTION DELETE "
                f"{LIBRARY}, and restart the saver's process to let it load its own)"
            ]
            assert node_stats.take()[port][0] == 0  # (no FCALL there: it runs other code)
            assert node_stats.libraries()[port] == other  # (not the saver's to replace)
    finally:
        node_stats.admins[port].function_delete(LIBRARY)  # (the next saver loads its own)


@pytest.mark.slow
def test_a_primary_down_or_hung_holds_up_no_call_to_another(tmp_path: Path) -> None:
    """The library is checked on each primary before its first FCALL there. It was checked
    on every primary at once: one that did not answer held up every call of the saver for its
    socket timeout, and one that was down counted as a dropped connection each time, which
    turned functions off for good after three (the script of the call went through, on its
    own primary)."""
    cluster = LocalCluster(tmp_path).start()
    admins = {node.port: redis.Redis(port=node.port) for node in cluster.nodes}
    try:
        for admin in admins.values():  # (the other primaries serve their slots on)
            admin.config_set("cluster-require-full-coverage", "no")
        with RedisCluster.from_url(cluster.url) as probe:
            prefix = new_prefix()
            keys = KeySchema(prefix)
            # the primary that answers holds the prefix's registry (P:mk), which a saver
            # writes before its first put
            away = port_of(probe, keys.metadata_keys())
            ports = {f"t{i}": port_of(probe, keys.thread(keys.tag(f"t{i}"))) for i in range(40)}
        hung, down = (node for node in cluster.nodes if node.port != away)
        url = f"redis://127.0.0.1:{away}/0"  # (a client starts from a primary that answers)
        threads = [t for t, port in ports.items() if port == away][:4]
        on_down = next(t for t, port in ports.items() if port == down.port)

        def turn(saver: RedisSaver, thread: str, step: int) -> None:
            # (metadata without strings: no threads-by-value list to write, on any primary)
            version = saver.get_next_version(None, None)
            saver.put(cfg(thread), make_checkpoint({"v": step}, {"v": version}), {"step": step},
                      {"v": version})  # fmt: skip
            got = saver.get_tuple(cfg(thread))
            assert got is not None and got.checkpoint["channel_values"] == {"v": step}

        with RedisSaver(url, cluster=True, prefix=prefix, functions=False) as writer:
            turn(writer, on_down, 0)
        # one primary hung (a cluster keeps serving with one primary out of three)
        hung.pause()
        try:
            with RedisSaver(url, cluster=True, prefix=prefix, socket_timeout=5) as saver:
                scripts = count_scripts(saver)
                for step, thread in enumerate(threads):
                    turn(saver, thread, step)
                assert scripts == []  # every call an FCALL on the primary that answers
        finally:
            hung.resume()
        # nothing was sent to the hung primary (what was would be counted once it resumed)
        sent = admins[hung.port].info("commandstats")
        assert [name for name in ("cmdstat_function|list", "cmdstat_function|load",
                                  "cmdstat_fcall") if name in sent] == []  # fmt: skip
        cluster.wait_until_healthy()
        # one primary down
        down.kill()
        with RedisSaver(url, cluster=True, prefix=prefix, socket_timeout=5) as saver:
            scripts = count_scripts(saver)
            for step, thread in enumerate(threads * 2):
                turn(saver, thread, step)
                if step < 4:  # (a call on the primary that is down fails, as before)
                    with pytest.raises(RedisUnavailableError):
                        saver.get_tuple(cfg(on_down))
            assert scripts == ["get_tuple"] * 4  # (those calls, as scripts); all else FCALLs
            assert saver._library.enabled
    finally:
        for admin in admins.values():
            admin.close()
        cluster.stop()


def test_saver_works_as_an_acl_user_limited_to_its_prefix_on_a_cluster(
    local_cluster: LocalCluster,
) -> None:
    """The least-privilege list of docs/reliability.md with its cluster part is enough on a
    cluster, sync and async, functions and scripts. (Without COMMAND, redis-py's cluster
    client did not start; without ZRANGEBYSCORE and HDEL, the threads-by-value lists failed;
    neither was listed.)"""
    prefix, user = new_prefix(), f"acl-{new_prefix()}"
    admins = [redis.Redis(port=node.port) for node in local_cluster.nodes]
    for admin in admins:
        try:
            admin.acl_setuser(f"{user}-probe", commands=["+client|setinfo"])
            admin.acl_deluser(f"{user}-probe")
            extra = ["client|setinfo"]
        except redis.exceptions.ResponseError:
            extra = []
        admin.acl_setuser(
            user, enabled=True, passwords=["+s3cret"], keys=[f"{prefix}:*"],
            commands=[f"+{c}" for c in SAVER_COMMANDS + CLUSTER_COMMANDS + extra],
        )  # fmt: skip
    url = f"redis://{user}:s3cret@127.0.0.1:{local_cluster.nodes[0].port}/0"
    try:
        for functions in (True, False):
            with RedisSaver(url, prefix=prefix, cluster=True, functions=functions) as saver:
                graph = build_chat(saver)
                for i in range(3):
                    turn(graph, f"t{functions}", f"user {i}")
                saver.copy_thread(f"t{functions}", f"copy{functions}")
                assert len(list(saver.list(None, filter={"source": "loop"}, limit=3))) == 3
                saver.prune([f"copy{functions}"], strategy="keep_latest")
                saver.delete_for_runs(["no-such-run"])
                assert saver.check_invariants() == []
                with pytest.raises(redis.exceptions.NoPermissionError):
                    saver.client.get("other:secret")

        async def async_turns() -> list[str]:
            async with AsyncRedisSaver(url, prefix=prefix, cluster=True) as saver:
                graph = build_chat(saver)
                for i in range(2):
                    config = {"configurable": {"thread_id": "async"}}
                    await graph.ainvoke({"messages": [f"user {i}"]}, config)  # type: ignore[arg-type]
                await saver.adelete_thread("tTrue")
                return [t.config["configurable"]["thread_id"] async for t in saver.alist(None)]

        threads = asyncio.run(async_turns())
        assert sorted(set(threads)) == ["async", "copyFalse", "copyTrue", "tFalse"]
        denied = [entry["object"] for admin in admins for entry in admin.acl_log(100)
                  if entry.get("username") == user]  # fmt: skip
        # the two reads above, and the eviction check each saver makes of each primary at its
        # first call (CONFIG GET maxmemory*: denied, so no warning); nothing else
        assert set(denied) == {"other:secret", "config|get"}
    finally:
        for admin in admins:
            admin.acl_deluser(user)
            admin.close()


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_batch_after_a_failover_goes_to_the_new_primary(tmp_path: Path, mode: str) -> None:
    """A batch of scripts (a thread's threads-by-value entries, delete_for_runs, ...) sent
    after a primary failed over to its replica: redis-py's pipeline re-routed one command
    per retry, the others still bound for the dead node, so four or more calls on it failed
    with RedisUnavailableError although the cluster had recovered. (A private cluster with a
    replica of the first primary, which is killed.)"""
    with cluster_with_replica(tmp_path) as cluster:
        prefix = new_prefix()
        # keys in the first primary's slots (0-5460)
        keys = [k for k in (f"{prefix}:probe{{{i}}}" for i in range(200))
                if key_slot(k.encode()) <= 5460][:5]  # fmt: skip
        calls = [ScriptCall("register_metadata_index", (k,), ("ready", "a")) for k in keys]
        url = cluster.url()
        if mode == "sync":
            with RedisSaver(url, cluster=True, prefix=prefix) as saver:
                assert saver._batch_on_cluster(calls) == [1] * 5  # (the slot map learnt)
                cluster.fail_over()
                assert saver._batch_on_cluster(calls) == [0] * 5  # (the replica has them)
        else:

            async def scenario() -> None:
                async with AsyncRedisSaver(url, cluster=True, prefix=prefix) as saver:
                    assert await saver._batch_on_cluster(calls) == [1] * 5
                    cluster.fail_over()
                    assert await saver._batch_on_cluster(calls) == [0] * 5

            asyncio.run(scenario())
        assert [cluster.admin.hget(k, "a") for k in keys] == [b"ready"] * 5


def test_a_cluster_that_is_down_is_unavailable(tmp_path: Path) -> None:
    """Every node down: a call, or a batch, fails with RedisUnavailableError, which the
    saver promises, not with redis-py's RedisClusterException ("Redis Cluster cannot be
    connected"), which reading the slot map again raises then."""
    cluster = LocalCluster(tmp_path).start()
    prefix = new_prefix()
    calls = [ScriptCall("register_metadata_index", (f"{prefix}:probe{{{i}}}",), ("ready", "a"))
             for i in range(6)]  # fmt: skip
    try:
        with RedisSaver(cluster.url, cluster=True, prefix=prefix, socket_timeout=2) as saver:

            async def async_calls(saver: AsyncRedisSaver, down: bool) -> None:
                if not down:
                    assert await saver._send(Batch(calls)) == [0] * 6
                    return
                for request in (Batch(calls), calls[0]):
                    with pytest.raises(RedisUnavailableError, match="cannot reach Redis"):
                        await saver._send(request)

            aio_saver = AsyncRedisSaver(cluster.url, cluster=True, prefix=prefix,
                                        socket_timeout=2)  # fmt: skip
            loop = asyncio.new_event_loop()
            assert saver._send(Batch(calls)) == [1] * 6
            loop.run_until_complete(async_calls(aio_saver, down=False))
            # (keys in two slots: redis-py's own error, not "cannot reach Redis")
            two_slots = ScriptCall("register_metadata_index", (f"{prefix}:a", f"{prefix}:b"), ())
            with pytest.raises(RedisClusterException, match="same key slot") as raised:
                saver._send(two_slots)
            assert not isinstance(raised.value, RedisUnavailableError)
            for node in cluster.nodes:
                node.kill()
            for request in (Batch(calls), calls[0]):
                with pytest.raises(RedisUnavailableError, match="cannot reach Redis"):
                    saver._send(request)
            loop.run_until_complete(async_calls(aio_saver, down=True))
            # a saver whose first call finds the cluster down (it reads the slot map then)
            late = AsyncRedisSaver(cluster.url, cluster=True, prefix=prefix, socket_timeout=2)
            loop.run_until_complete(async_calls(late, down=True))
            loop.close()
    finally:
        cluster.stop()


@pytest.mark.parametrize("saver_class", [RedisSaver, AsyncRedisSaver])
def test_a_cluster_saver_warns_once_when_a_primary_can_evict_its_keys(
    server_url: str,
    local_cluster: LocalCluster,
    saver_class: type[RedisSaver] | type[AsyncRedisSaver],
    caplog: pytest.LogCaptureFixture,
) -> None:
    # one primary of three evicts under volatile-lru: the saver asks each primary, once
    node = redis.Redis.from_url(local_cluster.nodes[2].url)
    node.config_set("maxmemory", "512mb")
    node.config_set("maxmemory-policy", "volatile-lru")
    try:
        with caplog.at_level(logging.WARNING, logger="langgraph.checkpoint.rediskv.eviction"):
            ttl = {"default_ttl": 60}
            prefix = new_prefix()
            if saver_class is RedisSaver:
                with RedisSaver(server_url, cluster=True, prefix=prefix, ttl=ttl) as saver:
                    for step in range(3):
                        put_and_read(saver, "t", step)
            else:

                async def turns() -> None:
                    async with AsyncRedisSaver.from_conn_string(
                        server_url, cluster=True, prefix=prefix, ttl=ttl
                    ) as saver:
                        for step in range(3):
                            checkpoint = make_checkpoint({"v": step}, {"v": step + 1})
                            await saver.aput(cfg("t"), checkpoint, {"step": step}, {"v": step + 1})
                            assert await saver.aget_tuple(cfg("t")) is not None

                asyncio.run(turns())
        assert [(r.levelno, r.getMessage()) for r in caplog.records] == [
            (logging.WARNING, policy_warning("volatile-lru", keys_expire=True))
        ]
    finally:
        node.config_set("maxmemory", "0")
        node.config_set("maxmemory-policy", "noeviction")
        node.close()
