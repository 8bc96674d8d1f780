"""Threads-by-value lists on Redis Cluster (core/cluster_lists.py, lua/include/lists.lua): the
client writes a thread's entry ahead of the checkpoints that need it, so that list(None, filter)
and delete_for_runs visit only the threads that may match, with the answers of a scan of every
thread; stale entries are removed only once their incarnation is gone."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from redis.cluster import RedisCluster, key_slot

from langgraph.checkpoint.rediskv import AsyncRedisSaver, ListingInterruptedError, RedisSaver
from langgraph.checkpoint.rediskv.core import Batch, ScriptCall, discovery, id_score, jobs
from langgraph.checkpoint.rediskv.core.cluster_lists import LIST_MARGIN
from langgraph.checkpoint.rediskv.keys import THREADS_BY_VALUE, KeySchema

from ..conftest import LocalCluster, SlotMove, new_prefix, set_limits, slot_moving
from ..integration.test_contract import cfg, chain, thread_by_thread
from ..integration.test_threads_by_value import (
    all_ids,
    expected,
    listed,
    listed_limit,
    populate,
    put_with_ids,
    shared_threads,
    threads_of,
)
from ..integration.test_threads_by_value import visited as visited


@pytest.fixture(scope="module")
def server_url(local_cluster: LocalCluster) -> str:
    return local_cluster.url


@pytest.fixture
def client(server_url: str) -> Iterator[RedisCluster]:
    c = RedisCluster.from_url(server_url)
    yield c
    c.close()


def new_saver(server_url: str, prefix: str | None = None) -> RedisSaver:
    return RedisSaver(server_url, cluster=True, prefix=prefix or new_prefix())


@pytest.fixture
def saver(server_url: str) -> Iterator[RedisSaver]:
    with new_saver(server_url) as s:
        yield s


def record_calls(saver: RedisSaver, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The names of the scripts the saver calls, in order."""
    names: list[str] = []
    send = saver._send

    def counted(request: Any) -> Any:
        calls = request.calls if isinstance(request, Batch) else [request]
        names.extend(call.name for call in calls if isinstance(call, ScriptCall))
        return send(request)

    monkeypatch.setattr(saver, "_send", counted)
    return names


def members(client: RedisCluster, key: str) -> list[tuple[bytes, float]]:
    return [(m, s) for m, s in client.zrange(key, 0, -1, withscores=True)]


def test_a_put_enters_its_thread_in_its_lists_first_and_rarely_again(
    saver: RedisSaver, client: RedisCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    keys = KeySchema(saver.prefix)
    calls = record_calls(saver, monkeypatch)
    md = {"user_id": "u1", "step": 0, "run_id": "r1", "score": 5, "source": "input"}
    [first] = chain(saver, "a", [md])
    # the store's format and the registry once, then the put refused, the thread entered in
    # its three lists (user_id, source, the run) and they in the lists' registry (one
    # pipeline), and the put again
    assert calls == [
        "store_format",
        "register_metadata_index",
        "register_metadata_index",
        "put_checkpoint",
        *["enter_thread_list"] * 3,
        "thread_list_registry",
        "put_checkpoint",
    ]
    tag = keys.tag("a")
    bounds = client.hgetall(keys.thread_bounds(tag))
    inc = bounds.pop(b"")
    score = id_score(first.encode())
    bound = score + LIST_MARGIN
    # per list: the bound of the thread's entry, and the newest score of its checkpoints
    assert bounds == {
        b"user_id:%22u1%22": str(int(bound)).encode(),
        b"@user_id:%22u1%22": str(int(score)).encode(),
        b"source:%22input%22": str(int(bound)).encode(),
        b"@source:%22input%22": str(int(score)).encode(),
        b"/r1": str(int(bound)).encode(),
        b"@/r1": str(int(score)).encode(),
    }
    member = (tag + inc.decode()).encode()
    for suffix in ("user_id:%22u1%22", "source:%22input%22", "/r1"):
        assert members(client, keys.threads_with(suffix)) == [(member, bound)]
    # numbers (step, score) have no list
    assert client.exists(keys.threads_with("step:0"), keys.threads_with("score:5")) == 0

    calls.clear()
    chain(saver, "a", [dict(md, step=1)])  # within the margin: nothing to write ahead
    assert calls == ["put_checkpoint"]
    calls.clear()
    [third] = chain(saver, "a", [dict(md, step=2, run_id="r2")])  # a new run: ahead, then put
    assert calls == ["enter_thread_list", "thread_list_registry", "put_checkpoint"]
    assert members(client, keys.threads_with("/r2")) == [
        (member, id_score(third.encode()) + LIST_MARGIN)
    ]


def test_a_filter_visits_only_the_listed_threads_with_the_answers_of_a_scan(
    saver: RedisSaver, visited: list[str]
) -> None:
    made = populate(saver)
    for flt in (
        {"user_id": "u1"},
        {"tenant": "t2"},
        {"user_id": "u1", "tenant": "t2"},
        {"run_id": "r5"},
        {"run_id": "r5", "step": 2},
        {"user_id": "nobody"},
    ):
        got, threads = listed(saver, visited, **flt)
        assert got == expected(made, **flt), flt
        # (two values: the first one's list, the other checked by each thread's call)
        first = {next(iter(flt)): next(iter(flt.values()))}
        if "run_id" in flt:
            first = {"run_id": flt["run_id"]}
        assert threads == threads_of(made, **first), flt


def test_delete_for_runs_visits_only_the_threads_of_the_runs(
    saver: RedisSaver, monkeypatch: pytest.MonkeyPatch
) -> None:
    made = populate(saver)
    calls = record_calls(saver, monkeypatch)
    saver.delete_for_runs(["r3", "r7"])
    assert calls.count("delete_for_runs") == 2  # one thread each
    assert list(saver.list(None, filter={"run_id": "r3"})) == []
    left = {t: rows for t, rows in made.items() if t not in ("thread-3", "thread-7")}
    assert thread_by_thread(saver.list(None)) == expected(left)


def test_a_delete_takes_the_thread_out_of_its_lists(
    saver: RedisSaver, client: RedisCluster
) -> None:
    keys = KeySchema(saver.prefix)
    chain(saver, "a", [{"user_id": "u1", "run_id": "r1"}])
    chain(saver, "b", [{"user_id": "u1", "run_id": "r2"}])
    saver.delete_thread("a")
    assert client.exists(keys.thread_bounds(keys.tag("a"))) == 0
    listed_members = [m for m, _ in members(client, keys.threads_with("user_id:%22u1%22"))]
    assert [m[: m.index(b"}") + 1] for m in listed_members] == [b"{b}"]
    assert client.exists(keys.threads_with("/r1")) == 0
    saver.prune(["b"], strategy="delete_all")
    assert client.exists(keys.threads_with("user_id:%22u1%22"), keys.threads_with("/r2")) == 0


def test_a_put_with_20k_metadata_values_enters_its_thread_in_every_list(
    saver: RedisSaver, client: RedisCluster
) -> None:
    """A put's lists were read, asked for and registered with one unpack() each
    (lua/include/lists.lua, lua/thread_list_registry.lua): 5,000 metadata values failed with
    'too many results to unpack'. 20,000 here, each a list of its own; the second put finds
    them all covered, the first asked for every one."""
    keys = KeySchema(saver.prefix)
    metadata = {f"k{j}": f"v{j}" for j in range(20_000)}
    first, second = chain(saver, "t", [metadata, metadata])
    for key, value in (("k0", "v0"), ("k19999", "v19999")):
        listed = [c.checkpoint["id"] for c in saver.list(None, filter={key: value})]
        assert listed == [second, first]
        assert [
            m[: m.index(b"}") + 1]
            for m, _ in members(client, keys.threads_with(f"{key}:%22{value}%22"))
        ] == [b"{t}"]
    assert client.zcard(keys.lists_registry()) == 20_000
    saver.delete_thread("t")
    assert client.exists(keys.threads_with("k0:%22v0%22")) == 0
    assert list(saver.list(None, filter={"k5": "v5"})) == []


def test_a_writer_that_wrote_ahead_for_a_deleted_thread_starts_a_new_incarnation(
    server_url: str, client: RedisCluster
) -> None:
    """The race the incarnation rules out: a saver that knows the thread's incarnation writes
    its entry ahead, the thread is deleted (by another saver, which removes that entry),
    then the put arrives. It must not record the old incarnation's entry as there."""
    prefix = new_prefix()
    keys = KeySchema(prefix)
    with new_saver(server_url, prefix) as writer, new_saver(server_url, prefix) as deleter:
        chain(writer, "a", [{"user_id": "u1"}])
        old_inc = client.hget(keys.thread_bounds(keys.tag("a")), "")
        deleter.delete_thread("a")
        # the writer still knows old_inc: its put writes ahead under it, is refused (no
        # incarnation), and writes again under a new one
        chain(writer, "a", [{"user_id": "u1"}])
        new_inc = client.hget(keys.thread_bounds(keys.tag("a")), "")
        assert new_inc is not None and new_inc != old_inc
        # the deleter's removal and the writer's stale entry: the live one is listed
        deleter_removes = members(client, keys.threads_with("user_id:%22u1%22"))
        assert (b"{a}" + new_inc) in [m for m, _ in deleter_removes]
        assert [
            t.config["configurable"]["thread_id"]
            for t in deleter.list(None, filter={"user_id": "u1"})
        ] == ["a"]


def test_entries_of_expired_threads_go_when_the_list_grows(
    saver: RedisSaver, client: RedisCluster
) -> None:
    keys = KeySchema(saver.prefix)
    chain(saver, "gone", [{"user_id": "u1"}])
    gone_member = b"{gone}" + client.hget(keys.thread_bounds(keys.tag("gone")), "")
    # the thread expires: every key of it goes (as expiry takes them, one by one)
    for key in client.scan_iter(match=f"{saver.prefix}:*{{gone}}*"):
        client.delete(key)
    saver._core.list_cache.drop(keys.tag("gone"))
    chain(saver, "new", [{"user_id": "u1"}])  # enters the list, samples "gone" and removes it
    listed_members = [m for m, _ in members(client, keys.threads_with("user_id:%22u1%22"))]
    assert gone_member not in listed_members
    assert [m[:5] for m in listed_members] == [b"{new}"]


def test_a_copy_is_listed_under_the_values_it_brings(saver: RedisSaver, visited: list[str]) -> None:
    ids = chain(saver, "src", [{"user_id": "u7", "run_id": "r1"}])
    chain(saver, "dst", [{"user_id": "u8", "run_id": "r2"}])
    saver.copy_thread("src", "dst")
    saver.copy_thread("src", "new")
    got, threads = listed(saver, visited, user_id="u7")
    assert got == [ids[0], ids[0], ids[0]]
    assert threads == ["dst", "new", "src"]
    got, threads = listed(saver, visited, run_id="r1")
    assert threads == ["dst", "new", "src"]


def test_a_store_written_before_the_lists_is_scanned_until_a_reindex(
    server_url: str, client: RedisCluster, visited: list[str]
) -> None:
    prefix = new_prefix()
    keys = KeySchema(prefix)
    with new_saver(server_url, prefix) as saver:
        made = populate(saver)
    # as a version without the lists left it: no lists, no bounds, no registry
    for pattern in (f"{prefix}:tm:*", f"{prefix}:tb:*", f"{prefix}:mk"):
        for key in client.scan_iter(match=pattern):
            client.delete(key)
    with new_saver(server_url, prefix) as saver:
        got, threads = listed(saver, visited, user_id="u1")
        assert got == expected(made, user_id="u1")
        assert len(threads) == len(made)  # "building": every thread visited
        assert saver.reindex_metadata() == len(made) * 3  # user_id, tenant, the run: each
        assert client.hget(keys.metadata_keys(), THREADS_BY_VALUE) == b"ready"
        got, threads = listed(saver, visited, user_id="u1")
        assert got == expected(made, user_id="u1")
        assert threads == threads_of(made, user_id="u1")
        saver.delete_for_runs(["r2"])
        assert list(saver.list(None, filter={"run_id": "r2"})) == []


def close_id(thread: int, step: int) -> str:
    """UUID-like ids of threads 256 id_score() units apart: far closer than LIST_MARGIN, so
    that every thread's list score is above every other thread's checkpoints."""
    return f"00000001-{thread:03x}{step:x}-6000-8000-000000000000"


def test_a_shared_value_with_a_limit_visits_the_threads_newest_by_their_own_scores(
    saver: RedisSaver, client: RedisCluster, visited: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The list scores are loose by the margin (here: every thread's is above every
    checkpoint); the reader asks the threads their newest score (thread_lists.lua) and visits
    by it, so a limit visits the newest threads only, as on a standalone server."""
    made, newest_first = shared_threads(saver, close_id)
    keys = KeySchema(saver.prefix)
    scores = [s for _, s in members(client, keys.threads_with("tenant:%22shared%22"))]
    assert min(scores) > id_score(newest_first[0].encode())  # all loose
    calls = record_calls(saver, monkeypatch)
    got, threads = listed_limit(saver, visited, 5, tenant="shared")
    assert got == newest_first[:5]
    assert threads == [f"t{n:02d}" for n in range(32, 40)]  # a group (CANDIDATE_GROUP)
    assert calls.count("thread_lists") == 40  # every thread asked, in one round trip
    got, threads = listed_limit(saver, visited, 20, tenant="shared")
    assert got == newest_first[:20]
    assert threads == [f"t{n:02d}" for n in range(20, 40)]
    visited.clear()
    assert all_ids(saver, tenant="shared") == newest_first
    assert sorted(visited) == sorted(made)


def test_the_reader_removes_members_of_gone_incarnations(
    saver: RedisSaver, client: RedisCluster
) -> None:
    keys = KeySchema(saver.prefix)
    ids = chain(saver, "a", [{"user_id": "u1"}])
    index = keys.threads_with("user_id:%22u1%22")
    client.zadd(index, {b"{a}deadbeef": float("inf"), b"{gone}cafe": float("inf")})
    # with a limit, so few threads are visited at once, unasked: each thread once
    flt = {"user_id": "u1"}
    assert [t.checkpoint["id"] for t in saver.list(None, filter=flt, limit=10)] == ids
    assert [t.checkpoint["id"] for t in saver.list(None, filter=flt)] == ids
    assert [m[:3] for m, _ in members(client, index)] == [b"{a}"]


def timed_id(minutes: int, n: int) -> str:
    """A UUIDv6-like id whose time is `minutes` after a fixed start (id_score counts
    25.6 us steps: 2,343,750 a minute)."""
    score = 0x1F0000000000 * 16 + minutes * 2_343_750 + n * 16
    head = f"{score // 16:012x}"
    return f"{head[:8]}-{head[8:]}-6{n:03x}-8000-000000000000"


def test_lists_of_gone_threads_are_swept_once_idle(saver: RedisSaver, client: RedisCluster) -> None:
    """The lists never expire; before the registry (P:tl) a list that no thread wrote to
    again kept the entries of threads that expired for good (the review's defect 1: a run's
    list per turn). A write-ahead now sweeps up to 8 lists idle for an hour."""
    keys = KeySchema(saver.prefix)
    for n in range(6):
        put_with_ids(saver, f"old{n}", [timed_id(0, n)], {"run_id": f"run{n}", "req": f"q{n}"})
    lists_before = sorted(k.decode() for k in client.scan_iter(match=f"{saver.prefix}:tm:*"))
    assert len(lists_before) == 12  # each thread's run and req (step is a number)
    for n in range(6):  # they expire: every key of theirs goes
        for key in client.scan_iter(match=f"{saver.prefix}:*{{old{n}}}*"):
            client.delete(key)
    for n in range(3):  # two hours later, other threads write: each write-ahead sweeps 8
        put_with_ids(saver, f"new{n}", [timed_id(120, n)], {"run_id": f"new-run{n}"})
    left = sorted(k.decode() for k in client.scan_iter(match=f"{saver.prefix}:tm:*"))
    assert left == sorted(keys.threads_with(f"/new-run{n}") for n in range(3))
    registry = client.zrange(keys.lists_registry(), 0, -1)
    assert sorted(s.decode() for s in registry) == sorted(f"/new-run{n}" for n in range(3))


def test_a_thread_keeps_the_bounds_of_its_last_eight_runs_only(
    saver: RedisSaver, client: RedisCluster
) -> None:
    """A run per turn: before, P:tb kept two fields per run ever written (the review's defect
    2: 63 fields after 30 runs). The entries stay in the runs' lists, so delete_for_runs of an
    old run still finds the thread."""
    keys = KeySchema(saver.prefix)
    ids = [timed_id(n, 0) for n in range(30)]
    for n, checkpoint_id in enumerate(ids):
        put_with_ids(saver, "long", [checkpoint_id], {"run_id": f"run{n:02d}"})
    bounds = client.hgetall(keys.thread_bounds(keys.tag("long")))
    runs = sorted(f.decode() for f in bounds if f.startswith(b"/"))
    assert runs == [f"/run{n:02d}" for n in range(22, 30)]
    assert sorted(f.decode() for f in bounds if f.startswith(b"@")) == [f"@{r}" for r in runs]
    saver.delete_for_runs(["run03"])
    assert [t.checkpoint["id"] for t in saver.list(cfg("long"))] == ids[:3:-1] + ids[2::-1]


def test_pinning_a_thread_keeps_its_bounds_from_the_first_step(
    server_url: str, client: RedisCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    """set_thread_ttl works in steps and gave P:tb its new expiry in the last one: a pinned
    thread whose job outlasted P:tb's old expiry lost it, and with it every list's view of the
    thread (the review's lesser concern). Now the first step extends it."""
    prefix = new_prefix()
    keys = KeySchema(prefix)
    with RedisSaver(server_url, cluster=True, prefix=prefix, ttl={"default_ttl": 1}) as saver:
        chain(saver, "pinned", [{"user_id": "u1", "step": s} for s in range(20)])
        bounds = keys.thread_bounds(keys.tag("pinned"))
        assert 0 < client.pttl(bounds) <= 60_000
        set_limits(monkeypatch, saver, reap_step=5)  # many steps
        monkeypatch.setattr(jobs, "reap_tag", lambda core, tag: iter(()))  # the first only
        saver.pin_thread("pinned")
        assert client.pttl(bounds) == -1
        assert client.exists(keys.gc(keys.tag("pinned"))) == 1  # the job is not done


def test_the_checker_reports_a_list_without_the_thread_and_an_uncovered_checkpoint(
    saver: RedisSaver, client: RedisCluster
) -> None:
    keys = KeySchema(saver.prefix)
    [first] = chain(saver, "a", [{"user_id": "u1", "run_id": "r1"}])
    assert saver.check_invariants() == []
    tag = keys.tag("a")
    inc = client.hget(keys.thread_bounds(tag), "").decode()
    client.zrem(keys.threads_with("/r1"), tag + inc)  # an entry lost
    client.hdel(keys.thread_bounds(tag), "user_id:%22u1%22")  # a bound lost
    problems = [(p.problem, p.key) for p in saver.check_invariants()]
    assert problems == [
        ("checkpoint not covered by its thread's list bounds", keys.checkpoint(tag, "", first)),
        (f"list without the thread's entry {tag + inc!r}", keys.threads_with("/r1")),
    ]


def per_thread_probes(
    saver: RedisSaver | AsyncRedisSaver, monkeypatch: pytest.MonkeyPatch
) -> list[int]:
    """How many threads each probe that went one call per thread (a Batch) asked."""
    sizes: list[int] = []
    original = saver._batch_on_cluster

    def counted(calls: Any) -> Any:
        asked = sum(call.name == "thread_lists" for call in calls)
        if asked:
            sizes.append(asked)
        return original(calls)

    monkeypatch.setattr(saver, "_batch_on_cluster", counted)
    return sizes


def test_the_probe_asks_each_node_once_and_each_thread_alone_when_its_node_fails(
    saver: RedisSaver, local_cluster: LocalCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The reader's probe went as a pipeline of a script call per thread, about 30 us of
    client time each; it is now a call per node (lua/thread_states.lua, flagged
    allow-cross-slot-keys). A node that cannot answer for its keys (the client's slot map
    out of date, a slot moving) has them asked one call each, as before: same answers."""
    _, newest_first = shared_threads(saver, close_id)
    alone = per_thread_probes(saver, monkeypatch)
    assert all_ids(saver, tenant="shared") == newest_first
    got = [t.checkpoint["id"] for t in saver.list(None, filter={"tenant": "shared"}, limit=5)]
    assert got == newest_first[:5]
    assert sum(alone) <= 3  # (a node that serves one thread of them asks it alone)
    # a map out of date: every key put on one node, which serves a third of them
    client = saver.client
    assert isinstance(client, RedisCluster)
    first = client.get_primaries()[0]
    monkeypatch.setattr(client, "get_node_from_key", lambda key, replica=False: first)
    alone.clear()
    got = [t.checkpoint["id"] for t in saver.list(None, filter={"tenant": "shared"}, limit=5)]
    assert got == newest_first[:5]
    assert sum(alone) == 40  # (the node's call failed whole: every thread asked alone)
    monkeypatch.undo()
    # a thread's slot moving, its keys gone first: its probe waits the move out
    keys = KeySchema(saver.prefix)
    slot = client.keyslot(keys.thread_bounds(keys.tag("t39")))
    alone = per_thread_probes(saver, monkeypatch)
    with slot_moving(local_cluster, slot, 1000, 0.3):
        got = [t.checkpoint["id"] for t in saver.list(None, filter={"tenant": "shared"}, limit=5)]
    assert got == newest_first[:5]
    assert sum(alone) >= 1


async def test_the_async_probe_asks_each_node_once(
    server_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with AsyncRedisSaver(server_url, cluster=True, prefix=new_prefix()) as saver:
        with RedisSaver(server_url, cluster=True, prefix=saver.prefix) as writer:
            _, newest_first = shared_threads(writer, close_id)
        alone = per_thread_probes(saver, monkeypatch)
        flt = {"tenant": "shared"}
        got = [t.checkpoint["id"] async for t in saver.alist(None, filter=flt, limit=5)]
        assert got == newest_first[:5]
        assert sum(alone) <= 3
        client = saver.client
        first = client.get_primaries()[0]  # type: ignore[union-attr]
        monkeypatch.setattr(client, "get_node_from_key", lambda key, replica=False: first)
        got = [t.checkpoint["id"] async for t in saver.alist(None, filter=flt, limit=5)]
        assert got == newest_first[:5]
        assert sum(alone) == 40


def test_a_saver_asks_whether_the_lists_are_complete_until_they_are(
    saver: RedisSaver, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every filtered listing on a cluster asked the registry (another slot) whether the
    lists are complete, a round trip of its own; once they are they stay so (only a reindex
    changes the state, from "building" to "ready"), and the saver asks no more."""
    chain(saver, "a", [{"user_id": "u1"}])
    calls = record_calls(saver, monkeypatch)
    for _ in range(3):
        assert len(list(saver.list(None, filter={"user_id": "u1"}, limit=5))) == 1
    assert calls.count("register_metadata_index") == 1
    # (one candidate, fewer than a group: visited at once, not asked its newest score first)
    assert calls.count("thread_lists") == 0


def test_a_thread_probed_is_not_visited_again_with_the_last_candidates(
    saver: RedisSaver, client: RedisCluster
) -> None:
    """Review of the last candidates visited at once (unprobed): a stale member of a thread
    probed and visited already (an incarnation gone, as an expired thread leaves) at the
    tail of the list made the thread's checkpoints come out twice."""
    for n in range(105):  # a minute apart; only t104, the newest, has tenant x
        md = {"user_id": "u1", "tenant": "x" if n == 104 else "y"}
        put_with_ids(saver, f"t{n:03d}", [timed_id(n, 0)], md)
    index = KeySchema(saver.prefix).threads_with("user_id:%22u1%22")
    client.zadd(index, {b"{t104}deadbeef": 1.0})
    got = [
        (t.config["configurable"]["thread_id"], t.checkpoint["id"])
        for t in saver.list(None, filter={"user_id": "u1", "tenant": "x"}, limit=5)
    ]
    assert got == [("t104", timed_id(104, 0))]


def thread_on(client: RedisCluster, keys: KeySchema, node: Any, letter: str, on: bool) -> str:
    """A thread id whose root is (``on``) or is not on ``node``."""
    return next(
        f"{letter}{n}"
        for n in range(1000)
        if (client.get_node_from_key(keys.thread(keys.tag(f"{letter}{n}"))).name == node.name) is on
    )


@pytest.mark.parametrize("direction", ["to a primary walked later", "to one walked already"])
def test_a_slot_moved_while_list_none_walks_the_primaries_stops_it(
    saver: RedisSaver, client: RedisCluster, local_cluster: LocalCluster, direction: str
) -> None:
    """Review: list(None) walks the primaries one after another while its caller consumes
    it; a slot moved meanwhile from a primary walked to one not walked yet gave its thread
    twice, and one moved the other way lost it. The listing now stops with
    ListingInterruptedError, what it gave before that being right."""
    keys = KeySchema(saver.prefix)
    primaries = sorted(client.get_primaries(), key=lambda n: n.name)
    if direction == "to a primary walked later":
        moved = thread_on(client, keys, primaries[0], "m", True)  # walked first
    else:
        moved = thread_on(client, keys, primaries[0], "m", False)  # walked later
    first = thread_on(client, keys, primaries[0], "f", True)
    chain(saver, first, [{"k": 1}])
    chain(saver, moved, [{"k": 1}])
    listing = saver.list(None)
    got = [next(listing).config["configurable"]["thread_id"]]  # from the first primary
    move = SlotMove(local_cluster, key_slot(keys.thread(keys.tag(moved)).encode()))
    try:
        if direction == "to one walked already":  # to the first primary, walked already
            first_id = move.admins[primaries[0].port].execute_command("CLUSTER", "MYID")
            if move.source_id == first_id.decode():
                pytest.skip("the slot is on the first primary")
            move.target = move.admins[primaries[0].port]
            move.target_port = primaries[0].port
            move.target_id = first_id.decode()
        move.begin()
        move.finish()
        with pytest.raises(ListingInterruptedError, match="list again once the move is done"):
            got += [t.config["configurable"]["thread_id"] for t in listing]
        assert len(got) == len(set(got)) and set(got) <= {first, moved}
    finally:
        move.close()
    listed_again = [t.config["configurable"]["thread_id"] for t in saver.list(None)]
    assert sorted(listed_again) == sorted([first, moved])  # once the move is done


def test_list_none_refuses_to_start_while_a_slot_is_being_moved(
    saver: RedisSaver, client: RedisCluster, local_cluster: LocalCluster
) -> None:
    keys = KeySchema(saver.prefix)
    chain(saver, "t", [{"k": 1}])
    move = SlotMove(local_cluster, key_slot(keys.thread(keys.tag("t")).encode()))
    try:
        move.begin()
        with pytest.raises(ListingInterruptedError):
            list(saver.list(None))
        move.finish()
    finally:
        move.close()
    assert [t.config["configurable"]["thread_id"] for t in saver.list(None)] == ["t"]


def test_a_saver_asks_again_whether_the_lists_are_complete_after_a_minute(
    server_url: str, client: RedisCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Review: a saver that once learned the lists complete never asked again, so a store
    emptied and refilled without them (a restored backup of an older version: no registry,
    no lists) lost every thread to its filtered listings and delete_for_runs. It trusts what
    it learned for a minute."""
    prefix = new_prefix()
    now = [1000.0]
    monkeypatch.setattr(discovery.time, "monotonic", lambda: now[0])
    with new_saver(server_url, prefix) as long_lived:
        chain(long_lived, "a", [{"user_id": "u1", "run_id": "r1"}])
        assert len(list(long_lived.list(None, filter={"user_id": "u1"}))) == 1  # ready
        for key in client.scan_iter(match=f"{prefix}:*"):
            client.delete(key)
        with new_saver(server_url, prefix) as writer:
            ids = chain(writer, "b", [{"user_id": "u1", "run_id": "r2"}])
        for pattern in (f"{prefix}:tm:*", f"{prefix}:tb:*", f"{prefix}:mk"):
            for key in client.scan_iter(match=pattern):
                client.delete(key)
        now[0] += 61
        assert [t.checkpoint["id"] for t in long_lived.list(None, filter={"user_id": "u1"})] == ids
        long_lived.delete_for_runs(["r2"])
        assert list(long_lived.list(cfg("b"))) == []
