"""Replicas and failover on a Redis Cluster (issue 27): a write-ahead of the threads-by-value
lists that a failover lost, and ``wait_for_replicas`` sent to the primary that took a write."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from redis.cluster import RedisCluster, key_slot

from langgraph.checkpoint.rediskv import AsyncRedisSaver, RedisSaver, ReplicationError
from langgraph.checkpoint.rediskv.core.cluster_lists import run_suffix
from langgraph.checkpoint.rediskv.keys import KeySchema, metadata_index_suffix

from ..conftest import LocalCluster, cluster_with_replica, new_prefix, slot_moving
from ..integration.test_contract import cfg, chain, make_checkpoint


def test_a_write_ahead_a_failover_lost_is_found_and_entered_again(
    local_cluster: LocalCluster,
) -> None:
    """A put writes the thread's entries in the lists of its run and of its values ahead
    (other nodes), then the thread's own node records that they are there. A failover of a
    list's node whose replica had not received the entry yet loses it, while the thread's
    record stays: the thread was hidden from filtered listings and delete_for_runs, and,
    finished, for good (a put of the same run and values writes nothing ahead). The checker
    reports it, and reindex_metadata enters the entry again."""
    prefix = new_prefix()
    keys = KeySchema(prefix)
    client = RedisCluster.from_url(local_cluster.url)
    try:
        with RedisSaver(local_cluster.url, cluster=True, prefix=prefix) as saver:
            ids = chain(saver, "done", [{"run_id": "r1", "user": "alice"}] * 2)
            chain(saver, "other", [{"run_id": "r2", "user": "alice"}])
            tag = keys.tag("done")
            member = tag.encode() + client.hget(keys.thread_bounds(tag), "")
            run_list = keys.threads_with(run_suffix("r1"))
            user_list = keys.threads_with(metadata_index_suffix("user", '"alice"'))
            # what the promoted replicas of those lists' nodes hold: the entries never came
            assert client.zrem(run_list, member) == 1
            assert client.zrem(user_list, member) == 1
            # a put of the thread's run and values: its entries are covered, it writes none
            more = chain(saver, "done", [{"run_id": "r1", "user": "alice"}])
            assert sorted(str(p) for p in saver.check_invariants()) == sorted(
                [
                    f"list without the thread's entry {member.decode()!r}: {run_list}",
                    f"list without the thread's entry {member.decode()!r}: {user_list}",
                ]
            )
            hidden = saver.list(None, filter={"user": "alice"})
            assert [t.config["configurable"]["thread_id"] for t in hidden] == ["other"]
            saver.reindex_metadata()
            assert saver.check_invariants() == []
            found = saver.list(None, filter={"user": "alice"})
            assert sorted(t.checkpoint["id"] for t in found if
                          t.config["configurable"]["thread_id"] == "done") == sorted(
                ids + more)  # fmt: skip
            saver.delete_for_runs(["r1"])
            assert saver.get_tuple(cfg("done")) is None
            assert saver.get_tuple(cfg("other")) is not None
            assert saver.check_invariants() == []
    finally:
        client.close()


def _thread_in_slots(prefix: str, first: int, last: int) -> str:
    keys = KeySchema(prefix)
    return next(
        t
        for t in (f"t{i}" for i in range(1000))
        if first <= key_slot(keys.thread(keys.tag(t)).encode()) <= last
    )


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["sync", "async"])
def test_wait_for_replicas_waits_on_the_primary_that_took_the_write(
    tmp_path: Path, mode: str
) -> None:
    """A private cluster whose first primary has a replica, the others none: with
    wait_for_replicas=1 a put of a thread of the first primary's slots is acknowledged, and
    is on the replica promoted when that primary dies; a put on another primary (no replica)
    is a ReplicationError: WAIT went to the node of the write, not to any node. After the
    failover the saver's next put goes to the promoted replica (which has no replica: a
    ReplicationError again, the put stored)."""
    with cluster_with_replica(tmp_path) as cluster:
        prefix = new_prefix()
        replicated = _thread_in_slots(prefix, 0, 5460)
        alone = _thread_in_slots(prefix, 5461, 10922)
        url = cluster.url()
        options = {"cluster": True, "prefix": prefix, "wait_for_replicas": 1, "wait_timeout": 0.2}
        kept = make_checkpoint({"n": 1}, {"n": "1"})
        refused = make_checkpoint({"n": 1}, {"n": "1"})
        after = make_checkpoint({"n": 2}, {"n": "2"})

        fail_over = cluster.fail_over

        errors: list[str] = []
        if mode == "sync":
            with RedisSaver(url, **options) as saver:
                saver.put(cfg(replicated), kept, {}, {"n": "1"})
                with pytest.raises(ReplicationError) as raised:
                    saver.put(cfg(alone), refused, {}, {"n": "1"})
                errors.append(str(raised.value))
                fail_over()
                # the same saver: the put goes to the promoted replica, which has no replica
                with pytest.raises(ReplicationError) as raised:
                    saver.put(cfg(replicated, "", kept["id"]), after, {}, {"n": "2"})
                errors.append(str(raised.value))
        else:

            async def scenario() -> None:
                async with AsyncRedisSaver(url, **options) as saver:
                    await saver.aput(cfg(replicated), kept, {}, {"n": "1"})
                    with pytest.raises(ReplicationError) as raised:
                        await saver.aput(cfg(alone), refused, {}, {"n": "1"})
                    errors.append(str(raised.value))
                    fail_over()
                    with pytest.raises(ReplicationError) as raised:
                        await saver.aput(cfg(replicated, "", kept["id"]), after, {}, {"n": "2"})
                    errors.append(str(raised.value))

            asyncio.run(scenario())
        assert [e.split(" within")[0] for e in errors] == [
            "put_checkpoint: only 0 of the 1 replicas asked for (wait_for_replicas) "
            "acknowledged the write"
        ] * 2
        with RedisSaver(f"redis://127.0.0.1:{cluster.replica.port}/0", cluster=True,
                        prefix=prefix) as reader:  # fmt: skip
            history = [t.checkpoint["id"] for t in reader.list(cfg(replicated))]
            assert history == [after["id"], kept["id"]]  # (kept: acknowledged before)
            written = reader.get_tuple(cfg(alone))  # (the write itself happened)
            assert written is not None and written.checkpoint["id"] == refused["id"]
            assert reader.check_invariants() == []


@pytest.mark.parametrize("moved_before_the_call", [0, 5])
def test_a_waited_put_during_a_slot_move_waits_it_out_and_writes_whole(
    local_cluster: LocalCluster, moved_before_the_call: int
) -> None:
    """A waited write goes in a pipeline of its own: while its thread's slot is being moved
    it is refused before it starts (its slot guard), and goes again until the move ends, as
    a single call does. (The shared cluster has no replicas: the put is stored, and WAIT
    counts none.)"""
    prefix = new_prefix()
    keys = KeySchema(prefix)
    options = {"cluster": True, "prefix": prefix}
    with (
        RedisSaver(local_cluster.url, **options) as saver,
        RedisSaver(local_cluster.url, **options, wait_for_replicas=1, wait_timeout=0.05) as waiting,
    ):
        ids = chain(saver, "mover", [{"user": "u"}] * 3)
        slot = key_slot(keys.thread(keys.tag("mover")).encode())
        latest = make_checkpoint({"n": 3}, {"n": "4"})
        with (
            slot_moving(local_cluster, slot, moved_before_the_call, 1.0),
            pytest.raises(ReplicationError),
        ):
            waiting.put(cfg("mover", "", ids[-1]), latest, {"user": "u"}, {"n": "4"})
        listed = [t.checkpoint["id"] for t in saver.list(cfg("mover"))]
        assert listed == [latest["id"], *ids[::-1]]
        assert saver.check_invariants() == []
