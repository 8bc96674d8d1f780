"""Threads-by-value indexes (P:tm, standalone servers): list(None, filter) on a metadata key
that no saver declared in index_metadata visits only the threads listed under the filter's
values, with the same answers as a scan of every thread. Short string values of any key
are listed (core.thread_indexed), LangGraph's source too; numbers, step and run_id are not.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from typing import Any

import pytest
import redis

from langgraph.checkpoint.rediskv import RedisSaver
from langgraph.checkpoint.rediskv.core import discovery, id_score, paging
from langgraph.checkpoint.rediskv.keys import THREADS_BY_VALUE, KeySchema

from ..clock import advance_time
from ..conftest import data_keys, keys_of, record_of, set_limits, set_record_field
from .test_contract import cfg, chain, make_checkpoint, thread_by_thread

THREADS = 24


def metadata_of(n: int, step: int) -> dict[str, Any]:
    return {"user_id": f"u{n % 4}", "tenant": f"t{n % 3}", "step": step, "run_id": f"r{n}"}


def populate(saver: RedisSaver) -> dict[str, list[tuple[str, dict[str, Any]]]]:
    """THREADS threads of 3 checkpoints each; their (id, metadata) by thread."""
    made: dict[str, list[tuple[str, dict[str, Any]]]] = {}
    for n in range(THREADS):
        mds = [metadata_of(n, s) for s in range(3)]
        made[f"thread-{n}"] = list(zip(chain(saver, f"thread-{n}", mds), mds, strict=True))
    return made


def expected(made: dict[str, list[tuple[str, dict[str, Any]]]], **flt: Any) -> list[str]:
    """Brute force: every checkpoint whose metadata has the filter's values, newest first."""
    found = [
        cid
        for rows in made.values()
        for cid, md in rows
        if all(md.get(k) == v for k, v in flt.items())
    ]
    return sorted(found, reverse=True)


def threads_of(made: dict[str, list[tuple[str, dict[str, Any]]]], **flt: Any) -> list[str]:
    return sorted(
        t
        for t, rows in made.items()
        if any(all(md.get(k) == v for k, v in flt.items()) for _, md in rows)
    )


@pytest.fixture
def visited(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The threads that per-thread list calls visit."""
    seen: list[str] = []
    original = paging.list_call

    def counted(core: Any, thread_id: str, *args: Any, **kw: Any) -> Any:
        seen.append(thread_id)
        return original(core, thread_id, *args, **kw)

    monkeypatch.setattr(paging, "list_call", counted)
    return seen


def listed(saver: RedisSaver, visited: list[str], **flt: Any) -> tuple[list[str], list[str]]:
    visited.clear()
    got = thread_by_thread(saver.list(None, filter=flt))
    return got, sorted(set(visited))


def forget_threads_by_value(client: redis.Redis, prefix: str) -> None:
    """Make the store as an earlier version left it: no threads-by-value index, no "/"
    entries in ix, nothing in the registry about them."""
    for key in keys_of(client, f"{prefix}:tm:*") + keys_of(client, f"{prefix}:tv:*"):
        client.delete(key)
    client.hdel(KeySchema(prefix).metadata_keys(), THREADS_BY_VALUE)
    for key in keys_of(client, f"{prefix}:cp:*"):
        ix = record_of(client, key)["ix"].split(b",")
        set_record_field(client, key, "ix", b",".join(e for e in ix if not e.startswith(b"/")))


def test_a_filter_on_any_key_visits_only_the_threads_listed_under_its_value(
    saver: RedisSaver, visited: list[str]
) -> None:
    made = populate(saver)
    for user in ("u0", "u1", "u2", "u3"):
        got, threads = listed(saver, visited, user_id=user)
        assert got == expected(made, user_id=user) and len(got) == 18
        assert threads == threads_of(made, user_id=user) and len(threads) == 6
    # two values: the threads listed under both
    got, threads = listed(saver, visited, user_id="u1", tenant="t2")
    assert got == expected(made, user_id="u1", tenant="t2") and len(got) == 6
    assert threads == threads_of(made, user_id="u1", tenant="t2") == ["thread-17", "thread-5"]
    # a value no thread has: nothing visited
    assert listed(saver, visited, user_id="nobody") == ([], [])
    # numbers are not listed (most are counters): every thread is visited
    got, threads = listed(saver, visited, step=1)
    assert got == expected(made, step=1) and len(threads) == THREADS
    # with a limit and before, as a scan would answer
    flt = {"tenant": "t0"}
    everything = expected(made, **flt)
    page = [t.checkpoint["id"] for t in saver.list(None, filter=flt, limit=5)]
    assert page == everything[:5]
    rest = saver.list(None, filter=flt, before=cfg("thread-0", checkpoint_id=everything[4]))
    assert [t.checkpoint["id"] for t in rest] == everything[5:]


def test_deleted_and_pruned_threads_are_never_listed(
    saver: RedisSaver, visited: list[str], client: redis.Redis, prefix: str
) -> None:
    made = populate(saver)
    saver.delete_thread("thread-1")  # u1
    saver.prune(["thread-5"], strategy="keep_latest")  # u1: its two older checkpoints go
    saver.delete_for_runs(["r9"])  # thread-9, u1: all of it
    got, threads = listed(saver, visited, user_id="u1")
    kept = {cid for t in ("thread-13", "thread-17", "thread-21") for cid, _ in made[t]}
    assert got == sorted(kept | {made["thread-5"][-1][0]}, reverse=True)
    # the deleted threads may still be listed under the value (swept as new threads are
    # added), which costs a call each, never a wrong answer
    assert set(threads) >= {"thread-13", "thread-17", "thread-21", "thread-5"}
    index = KeySchema(prefix).threads_with("user_id:%22u1%22")
    listed_tags = set(client.zrange(index, 0, -1))
    assert listed_tags >= {KeySchema.tag(t).encode() for t in ("thread-13", "thread-5")}


def test_a_copy_is_listed_under_its_values(saver: RedisSaver, visited: list[str]) -> None:
    made = populate(saver)
    saver.copy_thread("thread-2", "copy-of-2")
    got, threads = listed(saver, visited, user_id="u2")
    assert threads == sorted([*threads_of(made, user_id="u2"), "copy-of-2"])
    assert len(got) == len(expected(made, user_id="u2")) + 3


def test_a_store_written_before_the_indexes_is_scanned_until_a_reindex(
    server_url: str, prefix: str, client: redis.Redis, visited: list[str]
) -> None:
    with RedisSaver(server_url, prefix=prefix) as writer:
        made = populate(writer)
    keys = KeySchema(prefix)
    forget_threads_by_value(client, prefix)
    with RedisSaver(server_url, prefix=prefix) as saver:
        got, threads = listed(saver, visited, user_id="u3")
        assert got == expected(made, user_id="u3") and len(threads) == THREADS  # a scan
        assert client.hget(keys.metadata_keys(), THREADS_BY_VALUE) == b"building"
        # a put meanwhile is indexed, and not mistaken for a complete index
        chain(saver, "late", [{"user_id": "u3", "step": 0}])
        got, threads = listed(saver, visited, user_id="u3")
        assert len(got) == 19 and len(threads) == THREADS + 1
        assert saver.reindex_metadata() == THREADS * 3 * 2  # (user_id and tenant of each)
        assert client.hget(keys.metadata_keys(), THREADS_BY_VALUE) == b"ready"
        got, threads = listed(saver, visited, user_id="u3")
        assert len(got) == 19 and threads == sorted([*threads_of(made, user_id="u3"), "late"])
        assert saver.check_invariants() == []


def test_the_indexes_expire_with_their_threads(
    server_url: str, prefix: str, client: redis.Redis
) -> None:
    with RedisSaver(server_url, prefix=prefix, ttl={"default_ttl": 1}) as saver:
        populate(saver)
        (index,) = keys_of(client, f"{prefix}:tm:user_id:%22u0%22")
        assert 0 < client.ttl(index) <= 60
        advance_time(client, prefix, 61)
        assert [k for k in data_keys(client, prefix) if k != f"{prefix}:mk"] == []


def test_numbers_long_values_step_and_run_id_are_not_listed(
    saver: RedisSaver, client: redis.Redis, prefix: str
) -> None:
    chain(
        saver,
        "t",
        [{"source": "loop", "step": 1, "run_id": "r", "n": 5, "long": "x" * 129, "ok": "y" * 128}],
    )
    assert sorted(keys_of(client, f"{prefix}:tm:*")) == [
        f"{prefix}:tm:ok:%22{'y' * 128}%22",
        f"{prefix}:tm:source:%22loop%22",
    ]


def test_a_value_every_thread_has_answers_a_limit_from_the_newest_threads(
    saver: RedisSaver, visited: list[str]
) -> None:
    for n in range(30):
        put_with_ids(saver, f"t{n:02d}", [uuid_like(n, 0), uuid_like(n, 1)], {"source": "loop"})
    got, threads = listed_limit(saver, visited, 3, source="loop")
    assert got == [uuid_like(29, 1), uuid_like(29, 0), uuid_like(28, 1)]
    assert threads == [f"t{n:02d}" for n in range(22, 30)]  # one group of 8


def test_a_thread_given_its_own_expiry_takes_the_indexes_only_it_is_in_along(
    saver: RedisSaver, client: redis.Redis, prefix: str
) -> None:
    chain(saver, "t", [{"user_id": "only-t", "step": 0}])
    chain(saver, "other", [{"user_id": "shared", "step": 0}])
    chain(saver, "t", [{"user_id": "shared", "step": 1}])
    keys = KeySchema(prefix)
    own = keys.threads_with("user_id:%22only-t%22")
    shared = keys.threads_with("user_id:%22shared%22")
    saver.set_thread_ttl("t", 120)  # minutes
    root_ttl = client.ttl(keys.thread(KeySchema.tag("t")))
    assert root_ttl > 0 and abs(client.ttl(own) - root_ttl) <= 1  # only t is listed: it follows
    assert client.ttl(shared) == -1  # "other" is listed too, and never expires
    saver.pin_thread("t")
    assert (client.ttl(own), client.ttl(shared)) == (-1, -1)
    assert saver.check_invariants() == []


# -- visiting order: the newest threads first, stopping early ---------------------------------


def put_with_ids(saver: RedisSaver, thread_id: str, ids: list[str], md: dict[str, Any]) -> None:
    """Checkpoints with the given ids, each the child of the previous."""
    parent = None
    for n, checkpoint_id in enumerate(ids):
        version = saver.get_next_version(None if n == 0 else f"{n:032}", None)
        checkpoint = make_checkpoint({"n": n}, {"n": version})
        checkpoint["id"] = checkpoint_id
        saver.put(cfg(thread_id, "", parent), checkpoint, {**md, "step": n}, {"n": version})
        parent = checkpoint_id


def uuid_like(thread: int, step: int) -> str:
    """A lowercase UUID whose text sorts by (thread, step): its score is exact and distinct."""
    return f"{thread:08x}-{step:04x}-6000-8000-000000000000"


def all_ids(saver: RedisSaver, **flt: Any) -> list[str]:
    return thread_by_thread(saver.list(None, filter=flt))


def test_id_score_follows_the_text_of_uuid_ids_and_is_infinite_for_others() -> None:
    assert id_score(b"1f1e88af-e849-6b4e-bffe-7e800f9857c9") == float(0x1F1E88AFE8496)
    assert id_score(b"00000000-0000-0") == 0.0
    for other in (b"1F1E88AF-E849-6B4E", b"ck-001", b"", b"1f1e88a-e849-6b4e", b"1f1e88af-e84-6"):
        assert id_score(other) == float("inf")


def test_what_a_put_s_client_computes_for_the_script_is_what_the_script_would(
    client: redis.Redis,
) -> None:
    """put_checkpoint.lua takes the id's score and each metadata value's index suffix from the
    client (cluster_lists.score_arg, index_suffix): they are what lua/include/keyschema.lua and
    indexes.lua compute, for ids of every form and values that need encoding."""
    from langgraph.checkpoint.rediskv.core import index_suffix
    from langgraph.checkpoint.rediskv.core.cluster_lists import score_arg
    from langgraph.checkpoint.rediskv.scripts import include_sources

    lua = (
        include_sources("keyschema", "indexes")
        + """
local out = {}
for j = 1, #ARGV, 3 do
  out[#out + 1] = score_arg(id_score(ARGV[j]))
  out[#out + 1] = enc(ARGV[j + 1]) .. ":" .. enc(ARGV[j + 2])
end
return out
"""
    )
    cases = [
        ("1f1e88af-e849-6b4e-bffe-7e800f9857c9", "user_id", '"u-17"'),
        ("00000000-0000-0", "tenant", '"t:1, é/%"'),
        ("ffffffff-ffff-f", "run_id", '"0197c0e8-aaaa-7bbb"'),
        ("ck-001", "a key,with:odd bytes", "12"),
        ("1F1E88AF-E849-6B4E", "step", "-1"),
        ("", "source", '"loop"'),
    ]
    args = [part for case in cases for part in case]
    reply = [x.decode() for x in client.eval(lua, 0, *args)]
    for n, (checkpoint_id, key, canonical) in enumerate(cases):
        assert score_arg(id_score(checkpoint_id.encode())) == reply[2 * n]
        assert index_suffix(key, canonical) == reply[2 * n + 1]
    assert index_suffix("user_id", "null") == ""
    assert index_suffix("user_id", '"' + "x" * 255 + '"') == ""  # 257 characters


class TenantKey(str, enum.Enum):
    TENANT = "tenant"
    SPACED = "tenant id"


def test_metadata_keys_that_are_not_plain_strings_are_indexed_by_their_text(
    server_url: str, prefix: str
) -> None:
    """The review of the client-encoded index suffixes: a str Enum key (equal to, and hashed
    as, its value) shared a cached suffix with the plain key of the same text, and one whose
    value needs escaping was encoded from its value; an int key raised TypeError. A key is
    indexed by its text, as the record's field names it (f"m:{key}")."""
    with RedisSaver(server_url, prefix=prefix, index_metadata=("run_id", "tenant")) as saver:
        [enum_first] = chain(saver, "a", [{TenantKey.TENANT: "acme"}])
        [plain] = chain(saver, "b", [{"tenant": "acme"}])
        [spaced] = chain(saver, "c", [{TenantKey.SPACED: "acme"}])
        [numbered] = chain(saver, "d", [{1: "one", "source": "loop"}])
        assert all_ids(saver, tenant="acme") == [plain]
        assert all_ids(saver, **{f"{TenantKey.TENANT}": "acme"}) == [enum_first]
        assert all_ids(saver, **{f"{TenantKey.SPACED}": "acme"}) == [spaced]
        assert all_ids(saver, **{"1": "one"}) == [numbered]
        assert saver.check_invariants() == []


def test_a_checkpoint_with_thousands_of_listed_values(saver: RedisSaver) -> None:
    """The review: a put entering its thread's P:tv once for all its values passed them to one
    SADD, over Lua's unpack() limit (about 8,000) for a metadata of 8,200 short strings."""
    wide = {f"k{i}": f"v{i}" for i in range(8200)}
    [match] = chain(saver, "t", [wide])
    assert all_ids(saver, k8100="v8100") == [match]
    assert saver.check_invariants() == []


def shared_threads(
    saver: RedisSaver, make_id: Callable[[int, int], str]
) -> tuple[dict[str, list[str]], list[str]]:
    """40 threads of 3 checkpoints with tenant "shared", ids from make_id(thread, step): the
    ids by thread, and all of them newest first."""
    made = {}
    for n in range(40):
        ids = [make_id(n, s) for s in range(3)]
        put_with_ids(saver, f"t{n:02d}", ids, {"tenant": "shared"})
        made[f"t{n:02d}"] = ids
    return made, sorted((i for ids in made.values() for i in ids), reverse=True)


def test_a_shared_value_with_a_limit_visits_the_newest_threads_only(
    saver: RedisSaver, visited: list[str]
) -> None:
    made, newest_first = shared_threads(saver, uuid_like)
    # limit 5: the first group (CANDIDATE_GROUP = 8 threads) holds them, and its oldest
    # checkpoint still at hand is newer than the 9th thread's score
    got, threads = listed_limit(saver, visited, 5, tenant="shared")
    assert got == newest_first[:5]
    assert threads == [f"t{n:02d}" for n in range(32, 40)]
    # limit 20: a group of 20 threads, and no more
    got, threads = listed_limit(saver, visited, 20, tenant="shared")
    assert got == newest_first[:20]
    assert threads == [f"t{n:02d}" for n in range(20, 40)]
    # before the 30th newest (t30's first): the first group (t39-t32) has nothing older, the
    # second (t31-t24) the 6 wanted, in t29 and t28
    before = cfg("t00", checkpoint_id=newest_first[29])
    visited.clear()
    page = saver.list(None, filter={"tenant": "shared"}, before=before, limit=6)
    assert [t.checkpoint["id"] for t in page] == newest_first[30:36]
    assert sorted(visited) == [f"t{n:02d}" for n in range(24, 40)]
    # without a limit: every checkpoint, each thread visited once
    visited.clear()
    assert all_ids(saver, tenant="shared") == newest_first
    assert sorted(visited) == sorted(made)


def listed_limit(
    saver: RedisSaver, visited: list[str], limit: int, **flt: Any
) -> tuple[list[str], list[str]]:
    visited.clear()
    got = [t.checkpoint["id"] for t in saver.list(None, filter=flt, limit=limit)]
    return got, sorted(set(visited))


def test_threads_with_ids_of_other_forms_are_visited_and_ordered_by_their_text(
    saver: RedisSaver, visited: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # ids that are not lowercase UUIDs score infinity: such threads come first, and a limit
    # stops only on ids it can compare (UUID-like ones)
    made = {
        "custom-high": ["zz-1", "zz-2"],  # after every UUID in text order
        "custom-low": ["0-a", "0-b"],  # before every UUID in text order
        "upper": ["0000000A-0001-6000-8000-000000000000"],  # upper case: not UUID-like here
    }
    for n in range(12):
        made[f"u{n:02d}"] = [uuid_like(n, s) for s in range(2)]
    for thread_id, ids in made.items():
        put_with_ids(saver, thread_id, ids, {"tenant": "mixed"})
    newest_first = sorted((i for ids in made.values() for i in ids), reverse=True)
    # chunks of 3 candidates: the three infinite scores tie across a chunk boundary
    set_limits(monkeypatch, saver, candidate_chunk=3)
    for limit in (1, 2, 3, 4, 5, 9, 25, 26, 27, None):
        visited.clear()
        listing = saver.list(None, filter={"tenant": "mixed"}, limit=limit)
        # (without a limit, thread by thread)
        got = thread_by_thread(listing) if limit is None else [t.checkpoint["id"] for t in listing]
        assert got == newest_first[:limit]
        assert len(visited) == len(set(visited))  # no thread twice
    assert sorted(visited) == sorted(made)
    # the infinite ones are visited first, whatever the limit
    got, threads = listed_limit(saver, visited, 1, tenant="mixed")
    assert got == ["zz-2"] and {"custom-high", "custom-low", "upper"} <= set(threads)


def test_a_thread_written_again_with_older_ids_keeps_its_higher_score(
    saver: RedisSaver, client: redis.Redis, prefix: str
) -> None:
    put_with_ids(saver, "t", [uuid_like(9, 0)], {"tenant": "x"})
    put_with_ids(saver, "u", [uuid_like(5, 0)], {"tenant": "x"})
    index = KeySchema(prefix).threads_with("tenant:%22x%22")
    tag = KeySchema.tag("t").encode()
    assert client.zscore(index, tag) == id_score(uuid_like(9, 0).encode())
    saver.delete_thread("t")
    assert client.zscore(index, tag) is None
    put_with_ids(saver, "t", [uuid_like(1, 0)], {"tenant": "x"})
    put_with_ids(saver, "t", [uuid_like(3, 0)], {"tenant": "y"})  # (another value)
    assert client.zscore(index, tag) == id_score(uuid_like(1, 0).encode())
    assert all_ids(saver, tenant="x") == [uuid_like(5, 0), uuid_like(1, 0)]
    # a copy is scored by what it holds
    saver.copy_thread("u", "v")
    assert client.zscore(index, KeySchema.tag("v").encode()) == id_score(uuid_like(5, 0).encode())
    assert saver.check_invariants() == []


def test_the_checker_reports_a_score_below_a_checkpoint_and_a_missing_entry(
    saver: RedisSaver, client: redis.Redis, prefix: str
) -> None:
    put_with_ids(saver, "t", [uuid_like(7, 0), uuid_like(7, 1)], {"tenant": "x", "user": "a"})
    keys = KeySchema(prefix)
    tag = KeySchema.tag("t")
    client.zadd(keys.threads_with("tenant:%22x%22"), {tag: id_score(uuid_like(7, 0).encode())})
    client.zrem(keys.threads_with("user:%22a%22"), tag)
    first, second = (keys.checkpoint(tag, "", uuid_like(7, s)) for s in (0, 1))
    assert sorted((p.problem, p.key) for p in saver.check_invariants()) == [
        ("thread missing from a threads-by-value index", first),
        ("thread missing from a threads-by-value index", second),
        ("threads-by-value index scores the thread below a checkpoint", second),
    ]


# -- found by review: what a thread leaves behind, copies during a reindex -------------------


def test_a_deleted_thread_leaves_no_index_of_values_only_gone_checkpoints_had(
    server_url: str, client: redis.Redis, prefix: str
) -> None:
    """A value that only pruned, run-deleted or trimmed checkpoints had kept its index with
    the deleted thread in it, forever: the thread's P:tv lists every index it is in."""
    with RedisSaver(server_url, prefix=prefix) as saver:
        chain(saver, "pruned", [{"title": "first draft"}, {"title": "final"}])
        saver.prune(["pruned"], strategy="keep_latest")
        chain(saver, "runs", [{"user": "alice", "run_id": "r1"}, {"user": "bob", "run_id": "r2"}])
        saver.delete_for_runs(["r1"])
    with RedisSaver(server_url, prefix=prefix, keep_last=1) as saver:
        chain(saver, "trimmed", [{"req": f"request-{i}"} for i in range(20)])
        values = client.smembers(KeySchema(prefix).thread_values(KeySchema.tag("trimmed")))
        assert len(values) == 20  # (still listed under the values of trimmed checkpoints)
        assert saver.check_invariants() == []
        for thread_id in ("pruned", "runs", "trimmed"):
            saver.delete_thread(thread_id)
    assert [k for k in data_keys(client, prefix) if k != f"{prefix}:mk"] == []


def test_an_index_kept_persistent_by_a_deleted_thread_expires_with_the_others(
    server_url: str, client: redis.Redis, prefix: str
) -> None:
    with RedisSaver(server_url, prefix=prefix, ttl={"default_ttl": 1}) as expiring:
        chain(expiring, "a", [{"tenant": "acme"}])
    with RedisSaver(server_url, prefix=prefix) as saver:
        chain(saver, "b", [{"tenant": "acme"}])  # no ttl: the index stops expiring
        index = KeySchema(prefix).threads_with("tenant:%22acme%22")
        assert client.ttl(index) == -1
        saver.delete_thread("b")
        assert 0 < client.ttl(index) <= 60  # a's remaining life
        chain(saver, "c", [{"tenant": "acme"}])
        saver.set_thread_ttl("c", 1)  # c and a both expire: so does the index
        assert 0 < client.ttl(index) <= 60
        advance_time(client, prefix, 61)
    assert [k for k in data_keys(client, prefix) if k != f"{prefix}:mk"] == []


def test_a_copy_made_while_a_reindex_runs_is_indexed_by_its_own_metadata(
    server_url: str, prefix: str, client: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The copy took the source's ix as it was: a source not reindexed yet gave a target
    outside the indexes, and the reindex (which scanned the threads before) never saw it."""
    with RedisSaver(server_url, prefix=prefix) as writer:
        chain(writer, "src", [{"tenant": "acme"}])
    keys = KeySchema(prefix)
    forget_threads_by_value(client, prefix)  # as an earlier version left the store
    original = discovery.scan_thread_ids

    def scan_then_copy(core: Any) -> Any:
        found = yield from original(core)
        with RedisSaver(server_url, prefix=prefix) as app:  # an app copies meanwhile
            app.copy_thread("src", "dst")
        return found

    with RedisSaver(server_url, prefix=prefix) as saver:
        monkeypatch.setattr(discovery, "scan_thread_ids", scan_then_copy)
        saver.reindex_metadata()
        monkeypatch.setattr(discovery, "scan_thread_ids", original)
        assert client.hget(keys.metadata_keys(), THREADS_BY_VALUE) == b"ready"
        found = saver.list(None, filter={"tenant": "acme"})
        assert sorted(t.config["configurable"]["thread_id"] for t in found) == ["dst", "src"]
        assert saver.check_invariants() == []


# -- found by a second review: several values, chunks and ties, a thread deleted by its runs --


def score_id(score: int, n: int = 0) -> str:
    """A UUID-like id whose score follows `score`."""
    return f"{score:08x}-0000-6000-8000-{n:012x}"


def put_one(saver: RedisSaver, thread_id: str, checkpoint_id: str, md: dict[str, Any]) -> None:
    version = saver.get_next_version(None, None)
    checkpoint = make_checkpoint({"n": 1}, {"n": version})
    checkpoint["id"] = checkpoint_id
    saver.put(cfg(thread_id), checkpoint, md, {"n": version})


def test_several_values_follow_the_driving_index_s_scores(saver: RedisSaver) -> None:
    """Each candidate came with the least of its scores, so the queue was not in order and
    a limit stopped before the newest match."""
    for k in range(8):  # newest checkpoints with a only; older ones with both
        put_one(saver, f"T{k}", score_id(100 + k), {"a": "x"})
        put_one(saver, f"T{k}", score_id(1 + k), {"a": "x", "b": "y"})
    put_one(saver, "T8", score_id(50), {"a": "x"})
    put_one(saver, "T8", score_id(5), {"a": "x", "b": "y"})
    put_one(saver, "T9", score_id(40), {"a": "x", "b": "y"})
    put_one(saver, "B1", score_id(200), {"b": "y"})
    put_one(saver, "B2", score_id(201), {"b": "y"})
    want = [score_id(40), *(score_id(s) for s in (8, 7, 6, 5, 5, 4, 3, 2, 1))]
    assert all_ids(saver, a="x", b="y") == sorted(want, reverse=True)
    for limit in (1, 2, 3):
        got = [
            t.checkpoint["id"] for t in saver.list(None, filter={"a": "x", "b": "y"}, limit=limit)
        ]
        assert got == sorted(want, reverse=True)[:limit]


def test_chunks_end_on_a_whole_score_and_keep_their_driving_index(
    saver: RedisSaver, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Chunks were paged by an offset among equal scores, and each chose the smallest index
    anew: a thread that moved, or another index that became the smaller, made the next chunk
    skip threads."""
    set_limits(monkeypatch, saver, candidate_chunk=3)
    put_one(saver, "newest", score_id(11), {"a": "x", "b": "y"})
    for n in range(10):  # ten threads tied at one score
        put_one(saver, f"tied{n}", score_id(10, n), {"a": "x", "b": "y"})
    put_one(saver, "b-only", score_id(1), {"b": "y"})  # b's index is the larger one
    listing = saver.list(None, filter={"a": "x", "b": "y"})
    assert next(listing).checkpoint["id"] == score_id(11)
    # meanwhile: a tied thread already read (tags tie in reverse order) moves up, and a's
    # index becomes the larger
    put_one(saver, "tied9", score_id(12), {"a": "x", "b": "y"})
    for n in range(3):
        put_one(saver, f"a-only{n}", score_id(2), {"a": "x"})
    rest = [t.checkpoint["id"] for t in listing]
    assert sorted(rest, reverse=True) == rest
    assert set(rest) >= {score_id(10, n) for n in range(10)}


def test_a_thread_whose_runs_took_every_checkpoint_leaves_the_indexes(
    saver: RedisSaver, client: redis.Redis, prefix: str
) -> None:
    put_one(saver, "solo", score_id(5), {"a": "x", "run_id": "r1"})
    saver.delete_for_runs(["r1"])
    assert saver.get_tuple(cfg("solo")) is None
    assert [k for k in data_keys(client, prefix) if k != f"{prefix}:mk"] == []


# -- found by review (of a put that skipped its entries while a recorded bound covered them,
# reverted): the entries stay right through ttl changes, evictions and reindexes ------------


def test_a_thread_whose_index_expired_while_it_had_a_ttl_is_entered_again_once_pinned(
    server_url: str, client: redis.Redis, prefix: str
) -> None:
    """t's only checkpoint with tenant x is trimmed (keep_last); while t has its own ttl,
    another thread leaves x's index, which then follows t's life; pinned again, t's root is
    persistent but x's index keeps its expiry (no record of t lists x), and expires: t's
    next put with x enters it again."""
    keys, tag = KeySchema(prefix), KeySchema.tag("t")
    x = keys.threads_with("tenant:%22x%22")
    with RedisSaver(server_url, prefix=prefix, keep_last=1) as saver:
        put_one(saver, "t", uuid_like(9, 0), {"tenant": "x"})
        put_one(saver, "other", uuid_like(8, 0), {"tenant": "x"})
        put_one(saver, "t", uuid_like(9, 1), {"tenant": "y"})  # trims (9, 0)
        saver.set_thread_ttl("t", 1)  # (minutes)
        saver.delete_thread("other")
        assert 0 < client.ttl(x) <= 60  # follows t's life
        saver.pin_thread("t")
        assert client.ttl(keys.thread(tag)) == -1
        assert client.ttl(x) > 0  # (still expiring: t's records do not list x)
        advance_time(client, prefix, 61)
        assert client.exists(x) == 0
        put_one(saver, "t", uuid_like(9, 2), {"tenant": "x"})
        assert all_ids(saver, tenant="x") == [uuid_like(9, 2)]
        assert client.zscore(x, tag) == id_score(uuid_like(9, 2).encode())
        assert saver.check_invariants() == []


def test_savers_of_other_ttls_leave_no_thread_out_of_an_index_that_expired(
    server_url: str, client: redis.Redis, prefix: str
) -> None:
    """The same with no pin, and ids that are not UUIDs (they score infinity): a saver with
    a ttl returns t to its default (its root expiring), a saver without one puts another
    value (the root persistent again); x's index expires; t's next put with x enters it."""
    keys, tag = KeySchema(prefix), KeySchema.tag("t")
    x = keys.threads_with("tenant:%22x%22")
    with (
        RedisSaver(server_url, prefix=prefix, keep_last=1) as plain,
        RedisSaver(server_url, prefix=prefix, ttl={"default_ttl": 1}) as expiring,
    ):
        put_one(plain, "t", "a", {"tenant": "x"})
        put_one(plain, "other", "o", {"tenant": "x"})
        put_one(plain, "t", "b", {"tenant": "y"})  # trims a
        expiring.unpin_thread("t")  # t's root now expires (the ttl saver's default)
        plain.delete_thread("other")
        assert 0 < client.ttl(x) <= 60
        put_one(plain, "t", "c", {"tenant": "y"})
        assert client.ttl(keys.thread(tag)) == -1
        advance_time(client, prefix, 61)
        put_one(plain, "t", "d", {"tenant": "x"})
        assert all_ids(plain, tenant="x") == ["d"]
        assert plain.check_invariants() == []


def test_an_index_rebuilt_by_a_reindex_after_an_eviction_scores_the_next_put(
    saver: RedisSaver, client: redis.Redis, prefix: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """x's index evicted; the reindex writes the entries again at the checkpoints' scores;
    t's next put raises its score, so a limit of 1 answers with it, not with u's older one."""
    keys, tag = KeySchema(prefix), KeySchema.tag("t")
    x = keys.threads_with("tenant:%22x%22")
    put_one(saver, "t", uuid_like(9, 0), {"tenant": "x"})
    u_id = "00000009-0000-7000-8000-000000000000"  # (score just above t's first)
    put_one(saver, "u", u_id, {"tenant": "x"})
    client.delete(x)  # evicted
    saver.reindex_metadata()
    set_limits(monkeypatch, saver, candidate_group=1)  # (as with more threads than a group)
    assert client.zscore(x, tag) == id_score(uuid_like(9, 0).encode())
    put_one(saver, "t", uuid_like(9, 1), {"tenant": "x"})
    got = [c.checkpoint["id"] for c in saver.list(None, filter={"tenant": "x"}, limit=1)]
    assert got == [uuid_like(9, 1)]
    assert client.zscore(x, tag) == id_score(uuid_like(9, 1).encode())
    assert saver.check_invariants() == []


def test_an_evicted_index_is_made_again_by_the_next_put(
    saver: RedisSaver, client: redis.Redis, prefix: str
) -> None:
    keys, tag = KeySchema(prefix), KeySchema.tag("t")
    x = keys.threads_with("tenant:%22x%22")
    put_one(saver, "t", uuid_like(9, 0), {"tenant": "x"})
    client.delete(x)  # evicted
    put_one(saver, "t", uuid_like(9, 1), {"tenant": "x"})
    assert client.zscore(x, tag) == id_score(uuid_like(9, 1).encode())
    assert all_ids(saver, tenant="x") == [uuid_like(9, 1), uuid_like(9, 0)]
