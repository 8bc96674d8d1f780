"""``rediskv store ...``: the long-term memory store's commands, run through the CLI's entry
point, and ``store migrate`` from the real sources: PostgresStore, the official
langgraph-checkpoint-redis RedisStore (on a Redis Stack the session starts), another prefix
of this package's store, and a factory's InMemoryStore. Each migration is checked item by
item against the source: value, created_at and updated_at to the microsecond."""

from __future__ import annotations

import contextlib
import io
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from langgraph.store.base import BaseStore, PutOp

from langgraph.checkpoint.rediskv.__main__ import main
from langgraph.store.rediskv import RedisStore
from langgraph.store.rediskv.imports import micros
from langgraph.store.rediskv.keys import namespace_keys

from ..conftest import new_prefix
from ..store.test_store_vectors import KnownEmbeddings

MEMORIES = [
    (("users", "u1", "memories"), "m1", {"text": "tea", "kind": "preference"}),
    (("users", "u1", "memories"), "m2", {"text": "coffee", "kind": "fact", "n": 2}),
    (("users", "u2", "memories"), "m1", {"text": "water", "kind": "fact"}),
    (("users", "u2"), "profile", {"name": "Ada", "langs": ["en", "fr"]}),
    (("org",), "policy", {"text": "be kind"}),
]


def run(*argv: str) -> tuple[int, Any, str]:
    """``rediskv ARGV --json``: exit code, the JSON printed, stderr."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main([*argv, "--json"])
    return code, json.loads(out.getvalue()) if out.getvalue() else None, err.getvalue()


def fill(store: BaseStore) -> None:
    for namespace, key, value in MEMORIES:
        store.put(namespace, key, value)


def every_item(store: BaseStore) -> list[tuple[tuple[str, ...], str, Any, int, int]]:
    """Every item, by namespace and key, with its times in µs."""
    found = store.search((), limit=10_000)
    return sorted(
        (tuple(i.namespace), i.key, i.value, micros(i.created_at), micros(i.updated_at))
        for i in found
    )


@pytest.fixture
def store_prefix() -> str:
    return new_prefix()


@pytest.fixture
def filled(server_url: str, store_prefix: str) -> Iterator[RedisStore]:
    """The memories, the profile with a ttl, the tea and water memories with vectors."""
    index = {"dims": 4, "embed": KnownEmbeddings(), "fields": ["text"]}
    with RedisStore.from_conn_string(server_url, prefix=store_prefix, index=index) as store:
        for namespace, key, value in MEMORIES:
            ttl = 60 if key == "profile" else None
            embed = ["text"] if value.get("text") in ("tea", "water") else False
            store.put(namespace, key, value, index=embed, ttl=ttl)
        yield store


def test_namespaces(server_url: str, store_prefix: str, filled: RedisStore) -> None:
    code, data, _ = run("store", "namespaces", "--url", server_url, "--store-prefix", store_prefix)
    assert code == 0
    rows = [{k: v for k, v in r.items() if k != "updated_at"} for r in data["namespaces"]]
    assert rows == [
        {"namespace": ["org"], "items": 1, "with_ttl": 0, "with_vectors": 0},
        {"namespace": ["users", "u1", "memories"], "items": 2, "with_ttl": 0, "with_vectors": 1},
        {"namespace": ["users", "u2"], "items": 1, "with_ttl": 1, "with_vectors": 0},
        {"namespace": ["users", "u2", "memories"], "items": 1, "with_ttl": 0, "with_vectors": 1},
    ]
    newest = filled.get(("users", "u1", "memories"), "m2")
    assert newest is not None
    assert data["namespaces"][1]["updated_at"] == newest.updated_at.isoformat()
    code, data, _ = run(
        "store", "namespaces", "users", "--max-depth", "2", "--limit", "1", "--offset", "1",
        "--url", server_url, "--store-prefix", store_prefix,
    )  # fmt: skip
    assert (code, data["namespaces"]) == (0, [{"namespace": ["users", "u2"]}])


def test_items(server_url: str, store_prefix: str, filled: RedisStore) -> None:
    where = ("--url", server_url, "--store-prefix", store_prefix)
    code, data, _ = run("store", "items", "users.u1", *where)
    assert code == 0
    expected = [filled.get(("users", "u1", "memories"), k) for k in ("m2", "m1")]
    assert data["items"] == [
        {
            "namespace": ["users", "u1", "memories"],
            "key": i.key,
            "value": i.value,
            "created_at": i.created_at.isoformat(),
            "updated_at": i.updated_at.isoformat(),
        }
        for i in expected
        if i is not None
    ]
    code, data, _ = run("store", "items", "users", "--filter", '{"kind": "fact"}', *where)
    assert [(i["namespace"], i["key"]) for i in data["items"]] == [
        (["users", "u2", "memories"], "m1"),
        (["users", "u1", "memories"], "m2"),
    ]
    code, data, _ = run("store", "items", "users.u2", "--key", "profile", *where)
    assert [i["value"] for i in data["items"]] == [{"name": "Ada", "langs": ["en", "fr"]}]


def test_items_leaves_the_ttl_alone(
    server_url: str, store_prefix: str, filled: RedisStore, client: redis.Redis
) -> None:
    expiry = namespace_keys(store_prefix, ("users", "u2"))[3]
    before = client.zscore(expiry, "profile")
    where = ("--url", server_url, "--store-prefix", store_prefix)
    assert run("store", "items", "users.u2", *where)[0] == 0
    assert run("store", "items", "users.u2", "--key", "profile", *where)[0] == 0
    assert client.zscore(expiry, "profile") == before


def test_stats(server_url: str, store_prefix: str, filled: RedisStore, client: redis.Redis) -> None:
    filled.delete(("org",), "policy")  # an emptied namespace: still in the index
    code, data, _ = run("store", "stats", "--url", server_url, "--store-prefix", store_prefix)
    assert code == 0
    namespaces = [("users", "u1", "memories"), ("users", "u2"), ("users", "u2", "memories")]
    keys = [k for n in namespaces for k in namespace_keys(store_prefix, n)]
    memory = sum(client.memory_usage(k, samples=5) or 0 for k in keys)
    assert {k: v for k, v in data.items() if k not in ("memory_note", "top_namespaces")} == {
        "prefix": store_prefix,
        "namespaces_indexed": 4,
        "namespaces": 3,
        "items": 4,
        "with_ttl": 1,
        "with_vectors": 2,
        "memory_bytes": memory,
        "bytes_per_item": memory // 4,
    }
    assert [(r["namespace"], r["items"]) for r in data["top_namespaces"]] == [
        (["users", "u1", "memories"], 2),
        (["users", "u2"], 1),
        (["users", "u2", "memories"], 1),
    ]


def test_errors_are_one_line(server_url: str, store_prefix: str, filled: RedisStore) -> None:
    where = ("--url", server_url, "--store-prefix", store_prefix)
    cases = [
        (["store", "items", "users..u1", *where], "not a namespace: 'users..u1'"),
        (["store", "items", "users", "--filter", "{kind", *where], "--filter is not JSON"),
        (["store", "items", "users", "--filter", "[1]", *where], "--filter must be a JSON object"),
        (["store", "items", "org", "--key", "nope", *where], "no item 'nope' in namespace 'org'"),
        (["store", "stats", "--url", server_url, "--store-prefix", "a:b"], "prefix must be"),
        (["store", "stats", "--url", "redis://127.0.0.1:1/0"], "cannot reach Redis at"),
        (["store", "migrate", "--from", "mysql://x", *where], "unknown store source 'mysql://...'"),
    ]
    for argv, message in cases:
        code, data, err = run(*argv)
        assert (code, data) == (1, None), argv
        assert err.startswith("rediskv: error: ") and message in err, err
        assert err.count("\n") == 1, err


# -- migrate ---------------------------------------------------------------------------------


def migrate(server_url: str, store_prefix: str, source: str, *extra: str) -> tuple[int, Any]:
    code, data, err = run(
        "store", "migrate", "--from", source, "--url", server_url, "--store-prefix", store_prefix,
        *extra,
    )  # fmt: skip
    assert err == ""
    return code, data


def check_migration(server_url: str, store_prefix: str, source_url: str, source: BaseStore) -> None:
    """A dry run writes nothing; the run copies and verifies every item, exactly; a second run
    finds them present; a changed item is a conflict, which --recopy replaces."""
    expected = every_item(source)
    code, data = migrate(server_url, store_prefix, source_url, "--dry-run")
    assert (code, data["statuses"], data["verified"]) == (0, {"to copy": len(MEMORIES)}, 0), data[
        "problems"
    ]
    with RedisStore.from_conn_string(server_url, prefix=store_prefix) as target:
        assert every_item(target) == []
        code, data = migrate(server_url, store_prefix, source_url)
        assert (code, data["ok"], data["statuses"]) == (0, True, {"copied": len(MEMORIES)})
        assert (data["verified"], data["read"], data["problems"]) == (
            len(MEMORIES),
            len(MEMORIES),
            [],
        )
        assert every_item(target) == expected
        code, data = migrate(server_url, store_prefix, source_url)
        assert (code, data["statuses"]) == (0, {"present": len(MEMORIES)})
        target.put(("org",), "policy", {"text": "changed here"})
        code, data = migrate(server_url, store_prefix, source_url)
        assert (code, data["ok"]) == (2, False)
        assert data["statuses"] == {"conflict": 1, "present": len(MEMORIES) - 1}
        assert data["problems"] == ["org/policy: another item is here (--recopy replaces it)"]
        code, data = migrate(server_url, store_prefix, source_url, "--recopy")
        assert (code, data["statuses"]) == (0, {"present": len(MEMORIES) - 1, "replaced": 1})
        # replaced is an update here: its updated_at goes above the namespace's newest
        replaced = target.get(("org",), "policy")
        assert replaced is not None
        assert every_item(target) == [
            (n, k, v, c, micros(replaced.updated_at) if k == "policy" else u)
            for n, k, v, c, u in expected
        ]
        assert (
            micros(replaced.updated_at)
            > dict(((n, k), u) for n, k, _, _, u in expected)[(("org",), "policy")]
        )


def test_migrate_from_postgres_store(server_url: str, store_prefix: str, postgres_url: str) -> None:
    from langgraph.store.postgres import PostgresStore

    with PostgresStore.from_conn_string(postgres_url) as source:
        source.setup()
        fill(source)
        check_migration(server_url, store_prefix, postgres_url, source)


def test_migrate_from_the_official_redis_store(
    server_url: str, store_prefix: str, stack_url: str
) -> None:
    from langgraph.store.redis import RedisStore as OfficialRedisStore

    with OfficialRedisStore.from_conn_string(stack_url) as source:
        source.setup()
        fill(source)
        try:
            check_migration(server_url, store_prefix, f"langgraph-redis+{stack_url}", source)
        finally:
            for namespace, key, _ in MEMORIES:
                source.delete(namespace, key)


def test_migrate_reads_every_namespace_of_the_official_store(
    server_url: str, store_prefix: str, stack_url: str
) -> None:
    """Its list_namespaces sees the namespaces of its first 10 documents only (0.x): the
    migration does not rely on it."""
    from langgraph.store.redis import RedisStore as OfficialRedisStore

    namespaces = [("many", f"n{i:02d}") for i in range(15)]
    with OfficialRedisStore.from_conn_string(stack_url) as source:
        source.setup()
        for n, namespace in enumerate(namespaces):
            source.put(namespace, "k", {"n": n})
        try:
            assert len(source.list_namespaces(prefix=("many",), limit=100)) == 10
            code, data = migrate(
                server_url, store_prefix, f"langgraph-redis+{stack_url}", "--namespace", "many"
            )
            assert (code, data["namespaces"], data["statuses"]) == (0, 15, {"copied": 15})
            with RedisStore.from_conn_string(server_url, prefix=store_prefix) as target:
                assert target.list_namespaces(limit=100) == namespaces
        finally:
            for namespace in namespaces:
                source.delete(namespace, "k")


def test_migrate_from_another_prefix(server_url: str, store_prefix: str) -> None:
    source_prefix = new_prefix()
    with RedisStore.from_conn_string(server_url, prefix=source_prefix) as source:
        fill(source)
        check_migration(
            server_url, store_prefix, f"rediskv+{server_url}?prefix={source_prefix}", source
        )


def test_migrate_a_namespace_from_a_factory(
    server_url: str, store_prefix: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "memories_source.py").write_text(
        "from langgraph.store.memory import InMemoryStore\n"
        "STORE = InMemoryStore()\n"
        "def make():\n"
        "    return STORE\n"
    )
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [str(tmp_path), *sys.path])
    import memories_source  # type: ignore[import-not-found]

    fill(memories_source.STORE)
    code, data = migrate(
        server_url, store_prefix, "python:memories_source:make", "--namespace", "users.u1"
    )
    assert (code, data["namespaces"], data["statuses"]) == (0, 1, {"copied": 2})
    with RedisStore.from_conn_string(server_url, prefix=store_prefix) as target:
        assert every_item(target) == [
            i for i in every_item(memories_source.STORE) if i[0][:2] == ("users", "u1")
        ]
    sys.modules.pop("memories_source")


# -- what a production migration must not get wrong (a review's findings) ----------------------


def search_order(store: BaseStore, namespace: tuple[str, ...]) -> list[tuple[str, int]]:
    return [(i.key, micros(i.updated_at)) for i in store.search(namespace, limit=10_000)]


def test_a_postgres_batch_of_one_now_is_copied_whole(
    server_url: str, store_prefix: str, postgres_url: str
) -> None:
    """A PostgresStore batch stamps its items with one now(): its search pages (OFFSET over
    updated_at) return ties in any order, so the source is read by its primary key."""
    from langgraph.store.postgres import PostgresStore

    n = 1200
    with PostgresStore.from_conn_string(postgres_url) as source:
        source.setup()
        source.batch([PutOp(("users", "u1"), f"k{i:05d}", {"i": i}) for i in range(n)])
        code, data = migrate(server_url, store_prefix, postgres_url)
        assert (code, data["statuses"], data["read"], data["source_count"]) == (
            0,
            {"copied": n},
            n,
            n,
        )
        first = source.get(("users", "u1"), "k00000")
        assert first is not None
        stamp = micros(first.updated_at)
        with RedisStore.from_conn_string(server_url, prefix=store_prefix) as target:
            assert every_item(target) == [
                (("users", "u1"), f"k{i:05d}", {"i": i}, stamp, stamp) for i in range(n)
            ]


def test_search_order_and_updated_at_survive_many_pages(
    server_url: str, store_prefix: str, postgres_url: str
) -> None:
    """Items put one by one, more than a page of them: the copies keep their updated_at, so
    a search returns them in the source's order (newest first), not page by page."""
    from langgraph.store.postgres import PostgresStore

    with PostgresStore.from_conn_string(postgres_url) as source:
        source.setup()
        for i in range(520):
            source.put(("users", "u1"), f"k{i:04d}", {"i": i})
        assert migrate(server_url, store_prefix, postgres_url)[0] == 0
        with RedisStore.from_conn_string(server_url, prefix=store_prefix) as target:
            assert search_order(target, ("users", "u1")) == search_order(source, ("users", "u1"))


def test_each_item_is_read_once_whatever_the_namespaces_under_it(
    server_url: str, store_prefix: str
) -> None:
    source_prefix = new_prefix()
    with RedisStore.from_conn_string(server_url, prefix=source_prefix) as source:
        namespaces = [("a",), ("a", "b"), ("a", "b", "c")]
        source.batch([PutOp(n, f"k{i}", {"i": i}) for n in namespaces for i in range(700)])
        code, data = migrate(
            server_url, store_prefix, f"rediskv+{server_url}?prefix={source_prefix}"
        )
        assert (code, data["read"], data["statuses"]) == (0, 2100, {"copied": 2100})
        with RedisStore.from_conn_string(server_url, prefix=store_prefix) as target:
            assert every_item(target) == every_item(source)


def test_a_search_that_stops_at_maxsearchresults_is_reported(
    server_url: str, store_prefix: str, stack_url: str
) -> None:
    from langgraph.store.redis import RedisStore as OfficialRedisStore

    admin = redis.Redis.from_url(stack_url)
    before = admin.execute_command("FT.CONFIG", "GET", "MAXSEARCHRESULTS")[b"MAXSEARCHRESULTS"]
    with OfficialRedisStore.from_conn_string(stack_url) as source:
        source.setup()
        source.batch([PutOp(("capped", f"n{i % 3}"), f"k{i:03d}", {"i": i}) for i in range(600)])
        # a page (500) within it, the next past it (a page past it would be refused)
        admin.execute_command("FT.CONFIG", "SET", "MAXSEARCHRESULTS", "500")
        try:
            code, data = migrate(
                server_url, store_prefix, f"langgraph-redis+{stack_url}", "--namespace", "capped"
            )
        finally:
            admin.execute_command("FT.CONFIG", "SET", "MAXSEARCHRESULTS", before)
            source.batch([PutOp(("capped", f"n{i % 3}"), f"k{i:03d}", None) for i in range(600)])
            admin.close()
    assert (code, data["ok"], data["read"]) == (2, False, 500)
    assert data["problems"] == [
        "read 500 items, the source server's MAXSEARCHRESULTS: a search returns none past it, so "
        "some may be unread (raise it with FT.CONFIG SET, or migrate under narrower --namespace "
        "prefixes)"
    ]


def test_a_source_that_fails_is_named_as_the_source(server_url: str, store_prefix: str) -> None:
    code, data, err = run(
        "store", "migrate", "--from", "rediskv+redis://:hunter2@127.0.0.1:1/0?prefix=x",
        "--url", server_url, "--store-prefix", store_prefix,
    )  # fmt: skip
    assert (code, data) == (1, None)
    assert err.startswith("rediskv: error: reading rediskv+redis://:***@127.0.0.1:1/0?prefix=x: ")
    assert "hunter2" not in err


@pytest.mark.parametrize(
    ("source", "shown"),
    [
        (
            "postgresql://u:hunter2@h/db?sslpassword=hunter2",
            "postgresql://u:***@h/db?sslpassword=***",
        ),
        ("host=h user=u password=hunter2 dbname=db", "host=h user=u password=*** dbname=db"),
        ("mysql://u:hunter2@h/db", "mysql://..."),
    ],
)
def test_a_password_in_the_source_is_never_printed(source: str, shown: str) -> None:
    from langgraph.store.rediskv.migrate import redact_source

    assert redact_source(source) == shown
