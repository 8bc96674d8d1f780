"""The store (RedisStore, AsyncRedisStore) on the suite's real 3-primary cluster: the
differential machines of tests/store again (fewer examples), batches, searches and listings
whose namespaces span the three nodes, the TTL sweep, a node restart (the scripts lost:
NOSCRIPT), a slot move, a failover, and the errors of a wrong setting."""

from __future__ import annotations

import asyncio
import hashlib
import socket
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
import redis.asyncio.cluster as async_cluster
import redis.cluster as sync_cluster
from hypothesis import settings
from langgraph.store.base import GetOp, Item, ListNamespacesOp, PutOp, SearchOp
from redis.asyncio.cluster import RedisCluster as AsyncRedisCluster
from redis.cluster import RedisCluster, key_slot

from langgraph.checkpoint.rediskv import RedisUnavailableError
from langgraph.store.rediskv import AsyncRedisStore, RedisStore
from langgraph.store.rediskv.base import STORE_SCRIPTS, store_script_sources
from langgraph.store.rediskv.keys import namespace_index_key, namespace_keys
from langgraph.store.rediskv.sync_cluster import ClusterRounds

from ..conftest import (
    LocalCluster,
    SlotMove,
    cluster_with_replica,
    new_prefix,
    slot_moving,
)
from ..script_headers import header_counts
from ..store.test_differential import (
    SETTINGS,
    VECTOR_SETTINGS,
    Differential,
    VectorDifferential,
    fake_embed,
)
from ..store.test_store_ttl import Clock

CLUSTER: list[str] = []  # the cluster's URL (a state machine takes no fixture)


@pytest.fixture(autouse=True)
def cluster_url(local_cluster: LocalCluster) -> str:
    CLUSTER[:] = [local_cluster.url]
    return local_cluster.url


@pytest.fixture
def client(cluster_url: str) -> Iterator[RedisCluster]:
    c = RedisCluster.from_url(cluster_url)
    yield c
    c.close()


# -- the differential machines, on the cluster ------------------------------------------------
class OnCluster:
    asynchronous: bool

    def make_store(self, **options: Any) -> Any:
        if self.asynchronous:
            self.loop = asyncio.new_event_loop()
            return AsyncRedisStore(CLUSTER[0], cluster=True, prefix=new_prefix(), **options)
        return RedisStore(CLUSTER[0], cluster=True, prefix=new_prefix(), **options)


class ClusterDifferential(OnCluster, Differential):
    pass


class AsyncClusterDifferential(OnCluster, Differential):
    asynchronous = True


class ClusterVectorDifferential(OnCluster, VectorDifferential):
    pass


class AsyncClusterVectorDifferential(OnCluster, VectorDifferential):
    asynchronous = True


# fewer examples than on one server (the same rules ran there): a few seconds each
CLUSTER_SETTINGS = settings(SETTINGS, max_examples=12)
TestClusterDifferential = ClusterDifferential.TestCase
TestClusterDifferential.settings = CLUSTER_SETTINGS
TestAsyncClusterDifferential = AsyncClusterDifferential.TestCase
TestAsyncClusterDifferential.settings = CLUSTER_SETTINGS
CLUSTER_VECTOR_SETTINGS = settings(VECTOR_SETTINGS, max_examples=12)
TestClusterVectorDifferential = ClusterVectorDifferential.TestCase
TestClusterVectorDifferential.settings = CLUSTER_VECTOR_SETTINGS
TestAsyncClusterVectorDifferential = AsyncClusterVectorDifferential.TestCase
TestAsyncClusterVectorDifferential.settings = CLUSTER_VECTOR_SETTINGS


# -- by example -------------------------------------------------------------------------------
def nodes_of(client: RedisCluster, prefix: str, namespaces: list[tuple[str, ...]]) -> set[str]:
    """The primaries the namespaces' keys live on."""
    return {client.get_node_from_key(namespace_keys(prefix, n)[0]).name for n in namespaces}


def spy(monkeypatch: pytest.MonkeyPatch, cls: Any, name: str) -> list[tuple[Any, ...]]:
    """The arguments of every call of the (sync) method ``cls.name`` from now on."""
    calls: list[tuple[Any, ...]] = []
    original = getattr(cls, name)

    def spied(self: Any, *args: Any, **kwargs: Any) -> Any:
        calls.append(args)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(cls, name, spied)
    return calls


def spread_prefix(namespaces: list[tuple[str, ...]]) -> str:
    """A new prefix under which the namespaces' keys live on every primary of the cluster
    (its slots as LocalCluster.RANGES assigns them)."""
    while True:
        prefix = new_prefix()
        slots = [key_slot(namespace_keys(prefix, n)[0].encode()) for n in namespaces]
        if all(any(a <= s <= b for s in slots) for a, b in LocalCluster.RANGES):
            return prefix


USERS = [("users", f"u{i}", "memories") for i in range(12)]


def test_a_batch_over_every_node_answers_in_the_order_of_its_ops(
    cluster_url: str, client: RedisCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A batch whose ops span namespaces of every primary (and the index's slot): one
    pipeline a round, split by node, and each op's result at its op's place."""
    pipelines = spy(monkeypatch, sync_cluster.ClusterPipeline, "execute")
    prefix = spread_prefix(USERS)
    assert len(nodes_of(client, prefix, USERS)) == 3
    with RedisStore.from_conn_string(cluster_url, cluster=True, prefix=prefix) as store:
        for i, namespace in enumerate(USERS):
            store.put(namespace, "k", {"i": i})
        ops: list[Any] = []
        for i, namespace in enumerate(USERS):
            ops += [GetOp(namespace, "k"), PutOp(namespace, "k", {"i": -i}), GetOp(namespace, "x")]
            if i == 5:
                ops.append(SearchOp(("users",), filter={"i": {"$gte": 9}}, limit=2))
                ops.append(ListNamespacesOp(max_depth=2, limit=3))
        pipelines.clear()
        results = store.batch(ops)
        # four rounds, a pipeline each: the gets and the index's reads, the search's pages,
        # the listing's counts, the puts (each with its namespace's write-ahead)
        assert len(pipelines) == 4
        assert len(results) == len(ops) == 12 * 3 + 2
        gets = [r for op, r in zip(ops, results, strict=True) if isinstance(op, GetOp)]
        # (reads see the store as it was before the batch's puts)
        assert [None if r is None else r.value for r in gets] == [
            v for i in range(12) for v in ({"i": i}, None)
        ]
        assert all(r is None for op, r in zip(ops, results, strict=True) if isinstance(op, PutOp))
        search, listing = results[18:20]
        assert [(tuple(i.namespace), i.key, i.value) for i in search] == [
            (USERS[11], "k", {"i": 11}),
            (USERS[10], "k", {"i": 10}),
        ]
        assert listing == [("users", "u0"), ("users", "u1"), ("users", "u10")]
        # the batch's puts all went
        assert [store.get(n, "k").value for n in USERS] == [{"i": -i} for i in range(12)]


async def test_the_async_store_answers_a_batch_over_every_node_in_op_order(
    cluster_url: str,
) -> None:
    async with AsyncRedisStore.from_conn_string(
        cluster_url, cluster=True, prefix=new_prefix()
    ) as store:
        assert isinstance(store.client, AsyncRedisCluster)
        await store.abatch([PutOp(n, "k", {"i": i}) for i, n in enumerate(USERS)])
        results = await store.abatch([GetOp(n, "k") for n in reversed(USERS)])
        assert [r.value["i"] for r in results if r is not None] == list(range(11, -1, -1))
        found = await store.asearch(("users",), filter={"i": {"$lt": 3}}, limit=10)
        assert sorted(i.value["i"] for i in found) == [0, 1, 2]
        assert len(await store.alist_namespaces(prefix=("users",))) == 12


@pytest.mark.parametrize("own_client", [False, True])
async def test_the_async_store_on_a_cluster_waits_for_a_connection_past_its_pool(
    cluster_url: str, own_client: bool
) -> None:
    """redis-py's async cluster client raises MaxConnectionsError past a node's pool (its
    standalone one waits, with a blocking pool): the store's concurrent calls wait at a
    gate of the pool's size instead (200 at once: all failed past the 64th, before)."""
    own = AsyncRedisCluster.from_url(cluster_url, max_connections=4) if own_client else None
    size = 4 if own_client else 64
    try:
        async with AsyncRedisStore.from_conn_string(
            cluster_url, client=own, cluster=own is None, prefix=new_prefix()
        ) as store:
            await store.abatch([PutOp(n, "k", {"i": i}) for i, n in enumerate(USERS)])
            calls = [store.aget(USERS[i % len(USERS)], "k") for i in range(size * 3)]
            got = await asyncio.gather(*calls)
            assert [item.value["i"] for item in got] == [i % len(USERS) for i in range(size * 3)]
    finally:
        if own is not None:
            await own.aclose()


def test_search_and_list_namespaces_across_slots(cluster_url: str, client: RedisCluster) -> None:
    namespaces = [
        ("docs",),
        ("docs", "a"),
        ("docs", "a", "notes"),
        ("docs", "b", "notes"),
        ("docs", "c"),
        ("other", "notes"),
    ]
    prefix = spread_prefix(namespaces)
    assert len(nodes_of(client, prefix, namespaces)) == 3
    with RedisStore.from_conn_string(cluster_url, cluster=True, prefix=prefix) as store:
        for i, namespace in enumerate(namespaces):  # one put after the other: newest last
            store.put(namespace, f"k{i}", {"i": i, "even": i % 2 == 0})
        store.delete(("docs", "c"), "k4")  # empty: listed by none
        found = store.search(("docs",), limit=10)
        assert [(i.key, i.value["i"]) for i in found] == [
            ("k3", 3),
            ("k2", 2),
            ("k1", 1),
            ("k0", 0),
        ]
        assert [i.key for i in store.search(("docs",), limit=2, offset=1)] == ["k2", "k1"]
        assert [i.key for i in store.search((), filter={"even": True}, limit=10)] == ["k2", "k0"]
        assert store.list_namespaces() == sorted(set(namespaces) - {("docs", "c")})
        assert store.list_namespaces(prefix=("docs",), max_depth=2) == [
            ("docs",),
            ("docs", "a"),
            ("docs", "b"),
        ]
        assert store.list_namespaces(suffix=("notes",)) == [
            ("docs", "a", "notes"),
            ("docs", "b", "notes"),
            ("other", "notes"),
        ]
        assert store.list_namespaces(prefix=("docs", "*", "notes"), limit=1, offset=1) == [
            ("docs", "b", "notes")
        ]
        # the listing swept the empty namespace from the index (on the index's own node)
        index = client.zrange(namespace_index_key(prefix), 0, -1)
        assert b"docs.c" not in index and len(index) == 5


def test_the_ttl_sweep_on_a_cluster(cluster_url: str, client: RedisCluster) -> None:
    """sweep_ttl in bounded steps over namespaces of every node: the expired items go, the
    empty namespaces leave the index, and no key of theirs stays on any node."""
    namespaces = [(f"n{i}",) for i in range(9)]
    prefix = spread_prefix(namespaces)
    assert len(nodes_of(client, prefix, namespaces)) == 3
    clock = Clock()
    with RedisStore.from_conn_string(cluster_url, cluster=True, prefix=prefix) as store:
        clock.drive(store)
        for namespace in namespaces:
            store.put(namespace, "gone", {"v": 1}, ttl=1)
            store.put(namespace, "gone2", {"v": 2}, ttl=1)
        store.put(("n8",), "kept", {"v": 3})
        clock.advance(1)
        assert store.sweep_ttl(max_namespaces=4) == 8  # n0 .. n3
        assert store.sweep_ttl(max_namespaces=4) == 8  # n4 .. n7
        assert store.sweep_ttl(max_namespaces=4) == 2  # n8, then the index is done
        assert store.sweep_ttl(max_namespaces=4) == 0
        assert client.zrange(namespace_index_key(prefix), 0, -1) == [b"n8"]
        left = sorted(k.decode() for k in client.scan_iter(match=f"{prefix}:*", count=1000))
        assert left == [f"{prefix}:store:ns"] + [f"{prefix}:{{{prefix}:n8}}:{s}" for s in "hmz"]
        assert [i.key for i in store.search(())] == ["kept"]


async def test_the_async_ttl_sweep_on_a_cluster(cluster_url: str) -> None:
    clock = Clock()
    async with AsyncRedisStore.from_conn_string(
        cluster_url, cluster=True, prefix=new_prefix()
    ) as store:
        clock.drive(store)
        for i in range(6):
            await store.aput((f"n{i}",), "k", {"v": i}, ttl=1)
        clock.advance(1)
        assert await store.sweep_ttl() == 6
        assert await store.alist_namespaces() == []


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_node_restart_loses_the_scripts_and_the_store_loads_them_again(
    local_cluster: LocalCluster, client: RedisCluster, mode: str
) -> None:
    """A primary restarted (its data back from its AOF) has no scripts: the calls of a round
    there come back NOSCRIPT from the pipeline, go again alone and load them. Before, a
    round raised NoScriptError (and with SCRIPT FLUSH the same)."""
    prefix = spread_prefix(USERS)
    victim = local_cluster.nodes[1]
    on_victim = [n for n in USERS if nodes_of(client, prefix, [n]) == {f"127.0.0.1:{victim.port}"}]
    assert on_victim
    gets = [GetOp(n, "k") for n in USERS]

    def restart() -> None:
        victim.kill()
        victim.start()  # same port, same data directory: AOF and nodes.conf come back
        local_cluster.wait_until_healthy()
        with redis.Redis(port=victim.port) as direct:
            assert direct.hget(namespace_keys(prefix, on_victim[0])[0], "k") is not None

    def flush_scripts() -> None:
        for node in local_cluster.nodes:
            with redis.Redis(port=node.port) as direct:
                direct.script_flush()

    if mode == "sync":
        with RedisStore.from_conn_string(local_cluster.url, cluster=True, prefix=prefix) as store:
            store.batch([PutOp(n, "k", {"i": i}) for i, n in enumerate(USERS)])
            assert [r.value["i"] for r in store.batch(gets)] == list(range(12))  # (loaded)
            restart()
            assert [r.value["i"] for r in store.batch(gets)] == list(range(12))
            store.put(on_victim[0], "k2", {"after": "restart"})
            assert len(store.search(("users",), limit=20)) == 13
            flush_scripts()
            assert [r.value["i"] for r in store.batch(gets)] == list(range(12))
            assert len(store.search(("users",), limit=20)) == 13
        return

    async def scenario() -> None:
        async with AsyncRedisStore.from_conn_string(
            local_cluster.url, cluster=True, prefix=prefix
        ) as store:
            await store.abatch([PutOp(n, "k", {"i": i}) for i, n in enumerate(USERS)])
            assert [r.value["i"] for r in await store.abatch(gets)] == list(range(12))
            restart()
            assert [r.value["i"] for r in await store.abatch(gets)] == list(range(12))
            assert len(await store.asearch(("users",), limit=20)) == 12
            flush_scripts()
            assert [r.value["i"] for r in await store.abatch(gets)] == list(range(12))
            assert len(await store.asearch(("users",), limit=20)) == 12

    asyncio.run(scenario())


def test_a_batch_during_a_slot_move_waits_it_out(
    local_cluster: LocalCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A namespace whose slot is being moved, some of its keys moved already: its script is
    refused (TRYAGAIN) in the round's pipeline, goes again alone and waits for the move's
    end; the other namespaces' calls of the round are answered from the pipeline. (Before,
    the store took no cluster client; a call refused in the pipeline raised.)"""
    prefix = new_prefix()
    alone = spy(monkeypatch, ClusterRounds, "alone")
    with RedisStore.from_conn_string(local_cluster.url, cluster=True, prefix=prefix) as store:
        store.batch([PutOp(n, "k", {"i": i}) for i, n in enumerate(USERS)])
        store.put(USERS[3], "k2", {"more": True})
        slot = key_slot(namespace_keys(prefix, USERS[3])[0].encode())
        assert alone == []
        with slot_moving(local_cluster, slot, 2, 1.5):
            results = store.batch([GetOp(n, "k") for n in USERS] + [PutOp(USERS[3], "k3", {})])
        assert [r.value["i"] for r in results[:12]] == list(range(12))
        # the moving namespace's get went alone and waited the move out (nothing else went
        # alone: the put's round came after the move's end)
        assert [(call[1], tuple(call[2])) for (call,) in alone] == [
            ("store_get", tuple(namespace_keys(prefix, USERS[3])))
        ]
        assert sorted(i.key for i in store.search(USERS[3])) == ["k", "k2", "k3"]


def test_a_slot_move_that_does_not_end_fails_clearly_and_runs_nothing(
    local_cluster: LocalCluster,
) -> None:
    prefix = new_prefix()
    with RedisStore.from_conn_string(local_cluster.url, cluster=True, prefix=prefix) as store:
        store.put(("stuck",), "k", {"v": 1})
        store.put(("stuck",), "k2", {"v": 2})
        assert store._cluster is not None
        store._cluster.slot_move_wait = 0.3
        move = SlotMove(local_cluster, key_slot(namespace_keys(prefix, ("stuck",))[0].encode()))
        try:
            move.begin()
            move.move_keys(2)
            with pytest.raises(
                RedisUnavailableError, match=r"did not serve store_put within 0\.\d s \(a move"
            ):
                store.put(("stuck",), "k", {"v": 3})
            move.finish()
        finally:
            move.close()
        assert store.get(("stuck",), "k").value == {"v": 1}  # (the put was not run)


@pytest.mark.slow
def test_the_store_after_a_failover(tmp_path: Path) -> None:
    """A private cluster whose first primary has a replica, killed: the stores' next rounds
    go to the promoted replica (the slot map read again) and find what was written."""
    with cluster_with_replica(tmp_path) as cluster:
        prefix = spread_prefix(USERS)  # (some on the first primary, which fails over)
        url = cluster.url()
        gets = [GetOp(n, "k") for n in USERS]
        with RedisStore.from_conn_string(url, cluster=True, prefix=prefix) as store:
            store.batch([PutOp(n, "k", {"i": i}) for i, n in enumerate(USERS)])
            assert [r.value["i"] for r in store.batch(gets)] == list(range(12))
            with redis.Redis(port=cluster.cluster.nodes[0].port) as primary:
                assert primary.execute_command("WAIT", 1, 5000) == 1  # (the replica has it)
            cluster.fail_over()
            assert [r.value["i"] for r in store.batch(gets)] == list(range(12))
            store.batch([PutOp(n, "k2", {"i": i}) for i, n in enumerate(USERS)])
            assert len(store.search(("users",), limit=30)) == 24

            async def after() -> None:
                async with AsyncRedisStore.from_conn_string(
                    url, cluster=True, prefix=prefix
                ) as later:
                    assert len(await later.alist_namespaces()) == 12
                    assert [r.value["i"] for r in await later.abatch(gets)] == list(range(12))

            asyncio.run(after())


def test_every_script_call_on_the_cluster_fits_its_header_and_one_slot(
    cluster_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The EVALSHAs the stores send on a cluster (in the rounds' pipelines and alone), over
    a representative set of operations: as many KEYS and ARGV as the script's header says,
    and KEYS of one slot (the pipeline routes a call by its first key: the server would
    refuse keys of two slots, CROSSSLOT, or of another node, MOVED)."""
    by_sha = {hashlib.sha1(s.encode()).hexdigest(): n for n, s in store_script_sources().items()}
    seen: dict[str, set[tuple[int, int]]] = defaultdict(set)
    slots: list[set[int]] = []
    for cls in (
        sync_cluster.RedisCluster,
        sync_cluster.ClusterPipeline,
        async_cluster.RedisCluster,
        async_cluster.ClusterPipeline,
    ):
        original = cls.execute_command

        def recorded(self: Any, *args: Any, __original: Any = original, **kw: Any) -> Any:
            if args and str(args[0]).upper() == "EVALSHA":
                numkeys = int(args[2])
                keys = args[3 : 3 + numkeys]
                seen[by_sha[str(args[1])]].add((numkeys, len(args) - 3 - numkeys))
                slots.append({key_slot(str(k).encode()) for k in keys})
            return __original(self, *args, **kw)

        monkeypatch.setattr(cls, "execute_command", recorded)
    index = {"dims": 8, "embed": fake_embed, "fields": ["text"]}
    clock = Clock()
    with RedisStore.from_conn_string(
        cluster_url, cluster=True, prefix=new_prefix(), ttl={"refresh_on_read": True}, index=index
    ) as store:
        clock.drive(store)
        for i, namespace in enumerate(USERS[:6]):
            store.put(namespace, "k", {"text": "tea", "i": i}, ttl=1)
        store.put(USERS[0], "k", None)
        store.get(USERS[1], "k")
        store.search(("users",), limit=3)
        store.search(("users",), query="tea", limit=3)
        store.list_namespaces()
        copies = store.search(("users",), limit=2)
        store.import_items(
            [
                Item(
                    value=c.value,
                    key=c.key,
                    namespace=("copies", *c.namespace),
                    created_at=c.created_at,
                    updated_at=c.updated_at,
                )
                for c in copies
            ]
        )
        clock.advance(2)
        store.sweep_ttl()

    async def scenario() -> None:
        async with AsyncRedisStore.from_conn_string(
            cluster_url, cluster=True, prefix=new_prefix()
        ) as store:
            await store.abatch([PutOp(n, "k", {"i": 1}) for n in USERS[:6]])
            await store.abatch([GetOp(n, "k") for n in USERS[:6]])
            await store.asearch(("users",))
            await store.alist_namespaces()

    asyncio.run(scenario())
    counts = header_counts(STORE_SCRIPTS)
    assert sorted(seen) == sorted(STORE_SCRIPTS)
    for name, shapes in seen.items():
        keys, args = counts[name]
        assert all(keys.allows(k) and args.allows(a) for k, a in shapes), (name, shapes)
    assert len(slots) > 40 and all(len(s) == 1 for s in slots)


# -- settings -------------------------------------------------------------------------------
def test_cluster_true_on_a_standalone_server_or_client_is_refused(server_url: str) -> None:
    with pytest.raises(ValueError, match=r"^cluster=True, but the server at redis://.* is not a"):
        RedisStore(server_url, cluster=True)
    with (
        redis.Redis.from_url(server_url) as plain,
        pytest.raises(ValueError, match="not a redis-py RedisCluster"),
    ):
        RedisStore(client=plain, cluster=True)


async def test_the_async_store_with_cluster_true_on_a_standalone_server_is_refused(
    server_url: str,
) -> None:
    store = AsyncRedisStore(server_url, cluster=True, prefix=new_prefix())
    try:
        with pytest.raises(ValueError, match=r"^cluster=True, but the server at"):
            await store.aget(("a",), "k")
    finally:
        await store.aclose()


def test_a_cluster_client_of_ones_own_is_used_and_not_closed(cluster_url: str) -> None:
    own = RedisCluster.from_url(cluster_url)
    try:
        with RedisStore.from_conn_string(client=own, prefix=new_prefix()) as store:
            assert store.client is own
            store.put(("a",), "k", {"v": 1})
            assert store.get(("a",), "k").value == {"v": 1}
        assert own.ping()  # (still open)
    finally:
        own.close()


def test_a_cluster_nobody_answers_for_is_unavailable() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        url = f"redis://127.0.0.1:{s.getsockname()[1]}/0"  # (nothing listens there)
    with pytest.raises(RedisUnavailableError, match=r"^cannot reach Redis at redis://127.0.0.1"):
        RedisStore(url, cluster=True)


def test_a_store_is_migrated_into_the_cluster(
    cluster_url: str, client: RedisCluster, server_url: str
) -> None:
    """``rediskv store migrate`` from a standalone store into a cluster store: every item of
    namespaces on every primary, with its stamps (store_import on each node), a second run
    finding them all present."""
    import contextlib
    import io
    import json

    from langgraph.checkpoint.rediskv.__main__ import main

    source_prefix = new_prefix()
    prefix = spread_prefix(USERS)
    with RedisStore.from_conn_string(server_url, prefix=source_prefix) as source:
        source.batch(
            [PutOp(n, f"k{j}", {"i": i, "j": j}) for i, n in enumerate(USERS) for j in range(3)]
        )
        expected = sorted(
            (tuple(i.namespace), i.key, i.value, i.created_at, i.updated_at)
            for i in source.search(("users",), limit=100)
        )

        def cli(*argv: str) -> Any:
            out = io.StringIO()
            with contextlib.redirect_stdout(out):
                code = main([
                    "store", *argv, "--url", cluster_url, "--cluster", "--store-prefix", prefix,
                    "--json",
                ])  # fmt: skip
            return code, json.loads(out.getvalue())

        def migrate() -> Any:
            return cli("migrate", "--from", f"rediskv+{server_url}?prefix={source_prefix}")

        code, data = migrate()
        assert (code, data["statuses"], data["verified"]) == (0, {"copied": 36}, 36)
        with RedisStore.from_conn_string(cluster_url, cluster=True, prefix=prefix) as target:
            assert len(nodes_of(client, prefix, USERS)) == 3
            assert expected == sorted(
                (tuple(i.namespace), i.key, i.value, i.created_at, i.updated_at)
                for i in target.search(("users",), limit=100)
            )
        code, data = migrate()
        assert (code, data["statuses"]) == (0, {"present": 36})
        code, data = cli("stats")
        assert (code, data["namespaces"], data["items"]) == (0, 12, 36)
        code, data = cli("namespaces", "users", "--limit", "2")
        assert [(r["namespace"], r["items"]) for r in data["namespaces"]] == [
            (list(USERS[0]), 3),
            (list(USERS[1]), 3),
        ]
