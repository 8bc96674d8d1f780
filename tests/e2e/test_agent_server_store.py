"""The LangGraph Agent Server's store factory (``langgraph.store.rediskv.server.store``).

Fast tests of its settings and errors, then a real Agent Server (``langgraph dev``) with the
factory as its store and the saver as its checkpointer: a graph that remembers through
``get_store()`` across two threads, the server's store API over HTTP (``langgraph-sdk``),
semantic search with an embedder the deployment names by file, and a restart.
"""

from __future__ import annotations

import asyncio
import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from langgraph.store.base import PutOp
from redis.asyncio.cluster import RedisCluster as AsyncRedisCluster

from langgraph.checkpoint.rediskv import RedisUnavailableError
from langgraph.checkpoint.rediskv.server import settings_from_env
from langgraph.store.rediskv import AsyncRedisStore
from langgraph.store.rediskv.server import SettingsError, store, store_kwargs_from_env

from ..conftest import LocalCluster, new_prefix
from .test_agent_server import AgentServer, human, keys_under, server_env, unlink_prefix

MEMORY_GRAPH = Path(__file__).parents[1] / "agent_server" / "memory_graph.py"
STORE_FACTORY = "langgraph.store.rediskv.server.store"
SAVER_FACTORY = "langgraph.checkpoint.rediskv.server.checkpointer"

EMBED_SOURCE = '''
def embed(texts):
    """A deterministic embedder: how often each of four words occurs in the text."""
    words = ("tea", "coffee", "cats", "dogs")
    return [[float(t.lower().count(w)) for w in words] for t in texts]
'''


# -- settings ---------------------------------------------------------------------------------
def test_defaults() -> None:
    assert store_kwargs_from_env({}) == {"url": "redis://localhost:6379/0", "prefix": "store"}


def test_rediskv_cluster_makes_a_cluster_store() -> None:
    """The checkpointer's REDISKV_CLUSTER: the store's REDIS_URL is a cluster node too
    (before, the store's factory refused it)."""
    env = {"REDIS_URL": "redis://node1.example:7001", "REDISKV_CLUSTER": "true"}
    assert store_kwargs_from_env(env) == {
        "url": "redis://node1.example:7001",
        "prefix": "store",
        "cluster": True,
    }
    assert store_kwargs_from_env({"REDISKV_CLUSTER": "false"}) == store_kwargs_from_env({})


def test_the_store_section_of_langgraph_json(tmp_path: Path) -> None:
    (tmp_path / "embed.py").write_text(EMBED_SOURCE)
    section = {
        "path": STORE_FACTORY,
        "ttl": {"default_ttl": 60, "refresh_on_read": True},
        "index": {"dims": 4, "embed": f"{tmp_path}/embed.py:embed", "fields": ["text"]},
    }
    env = {
        "REDIS_URL": "redis://cache.example:6380/2",
        "REDISKV_STORE_PREFIX": "memory.prod",
        "LANGGRAPH_STORE": json.dumps(section),
    }
    kwargs = store_kwargs_from_env(env)
    embed = kwargs["index"].pop("embed")
    assert kwargs == {
        "url": "redis://cache.example:6380/2",
        "prefix": "memory.prod",
        "ttl": {"default_ttl": 60, "refresh_on_read": True},
        "index": {"dims": 4, "fields": ["text"]},
    }
    assert embed(["tea and more tea", "cats"]) == [
        [2.0, 0.0, 0.0, 0.0],
        [0.0, 0.0, 1.0, 0.0],
    ]
    # the checkpointer's settings take the store's variable for none of theirs, nor a typo
    assert settings_from_env(env).prefix == "lg"


@pytest.mark.parametrize(
    ("env", "message"),
    [
        (
            {"REDISKV_STORE_PREFIX": "a:b"},
            "REDISKV_STORE_PREFIX='a:b' is invalid: use a prefix without ':', '{' or '}'",
        ),
        (
            {"LANGGRAPH_STORE": "{not json"},
            "LANGGRAPH_STORE='{not json' is invalid: not JSON (langgraph.json's store)",
        ),
        (
            {"LANGGRAPH_STORE": '{"index": {"dims": 4}}'},
            'LANGGRAPH_STORE=\'{"index": {"dims": 4}}\' is invalid: index needs "dims" and "embed"',
        ),
        (
            {"REDISKV_STORE_PREFX": "x"},
            "REDISKV_STORE_PREFX='x' is invalid: unknown variable; known: REDISKV_PREFIX, ",
        ),
        (
            {"REDIS_URL": "http://x"},
            "REDIS_URL='http://x' is invalid: use a redis://, rediss:// or unix:// URL",
        ),
        (
            {"REDISKV_CLUSTER": "maybe"},
            "REDISKV_CLUSTER='maybe' is invalid: use true or false",
        ),
        (
            {"LANGGRAPH_STORE": '{"ttl": {"default_ttl": "1 day"}}'},
            'LANGGRAPH_STORE=\'{"ttl": {"default_ttl": "1 day"}}\' is invalid: ttl '
            "'default_ttl' must be a positive number of minutes, not '1 day'",
        ),
        (
            {"LANGGRAPH_STORE": '{"ttl": {"default_ttl": 60, "sweep_interval_minutes": -1}}'},
            'LANGGRAPH_STORE=\'{"ttl": {"default_ttl": 60, "sweep_interval_minutes": -1}}\' is '
            "invalid: ttl 'sweep_interval_minutes' must be a positive number of minutes, not -1",
        ),
        (
            {"LANGGRAPH_STORE": '{"ttl": {"default_ttl": 60, "refresh_on_read": "yes"}}'},
            'LANGGRAPH_STORE=\'{"ttl": {"default_ttl": 60, "refresh_on_read": "yes"}}\' is '
            "invalid: ttl 'refresh_on_read' must be true or false, not 'yes'",
        ),
    ],
)
def test_a_bad_setting_names_itself(env: dict[str, str], message: str) -> None:
    with pytest.raises(SettingsError) as failed:
        store_kwargs_from_env(env)
    assert str(failed.value).startswith(message)


def test_an_embedder_file_that_fails_to_load_is_named(tmp_path: Path) -> None:
    (tmp_path / "embed.py").write_text("raise RuntimeError('no API key')\n")
    section = {"index": {"dims": 4, "embed": f"{tmp_path}/embed.py:embed"}}
    with pytest.raises(SettingsError) as failed:
        store_kwargs_from_env({"LANGGRAPH_STORE": json.dumps(section)})
    assert f"embed '{tmp_path}/embed.py:embed': no API key" in str(failed.value)


async def test_the_factory_yields_a_store_of_the_environment(
    monkeypatch: pytest.MonkeyPatch, server_url: str, tmp_path: Path
) -> None:
    prefix = new_prefix()
    (tmp_path / "embed.py").write_text(EMBED_SOURCE)
    section = {"index": {"dims": 4, "embed": f"{tmp_path}/embed.py:embed", "fields": ["text"]}}
    monkeypatch.setenv("REDIS_URL", server_url)
    monkeypatch.setenv("REDISKV_STORE_PREFIX", prefix)
    monkeypatch.setenv("LANGGRAPH_STORE", json.dumps(section))
    client = redis.Redis.from_url(server_url)
    try:
        async with store() as memory:
            assert isinstance(memory, AsyncRedisStore)
            await memory.aput(("u1",), "a", {"text": "cats and dogs"})
            await memory.aput(("u1",), "b", {"text": "tea"})
            found = await memory.asearch(("u1",), query="tea")
            assert [(item.key, item.score) for item in found] == [("b", 1.0), ("a", 0.0)]
            assert keys_under(client, prefix) != []
    finally:
        unlink_prefix(client, prefix)
        client.close()


async def test_sync_calls_from_threads_work_before_any_async_call(
    monkeypatch: pytest.MonkeyPatch, server_url: str
) -> None:
    """The server runs a sync node in a thread: its store calls go to the store's loop,
    which the factory made the store on (nothing async ran before)."""
    prefix = new_prefix()
    monkeypatch.setenv("REDIS_URL", server_url)
    monkeypatch.setenv("REDISKV_STORE_PREFIX", prefix)
    client = redis.Redis.from_url(server_url)
    try:
        async with store() as memory:
            await asyncio.to_thread(memory.put, ("u1",), "a", {"text": "tea"})
            got = await asyncio.to_thread(memory.get, ("u1",), "a")
            assert got is not None and got.value == {"text": "tea"}
    finally:
        unlink_prefix(client, prefix)
        client.close()


async def test_a_client_that_decodes_replies_is_blamed_on_the_url(
    monkeypatch: pytest.MonkeyPatch, server_url: str, tmp_path: Path
) -> None:
    (tmp_path / "embed.py").write_text(EMBED_SOURCE)
    section = {"index": {"dims": 4, "embed": f"{tmp_path}/embed.py:embed"}}
    monkeypatch.setenv("REDIS_URL", f"{server_url}?decode_responses=True")
    monkeypatch.setenv("LANGGRAPH_STORE", json.dumps(section))
    with pytest.raises(SettingsError) as failed:
        async with store():
            pass
    assert str(failed.value).startswith(f"REDIS_URL='{server_url}?decode_responses=True' is")
    assert "the store's vectors (index=) are bytes" in str(failed.value)


async def test_the_sweeper_runs_with_sweep_interval_minutes(
    monkeypatch: pytest.MonkeyPatch, server_url: str
) -> None:
    prefix = new_prefix()
    ttl = {"default_ttl": 1, "sweep_interval_minutes": 1}
    monkeypatch.setenv("REDIS_URL", server_url)
    monkeypatch.setenv("REDISKV_STORE_PREFIX", prefix)
    monkeypatch.setenv("LANGGRAPH_STORE", json.dumps({"ttl": ttl}))
    client = redis.Redis.from_url(server_url)
    try:
        async with store() as memory:
            assert memory._sweeper is not None
            sweeper = memory._sweeper[0]
            assert not sweeper.done()
        assert sweeper.done()
    finally:
        unlink_prefix(client, prefix)
        client.close()


async def test_the_factory_yields_a_cluster_store_with_rediskv_cluster(
    monkeypatch: pytest.MonkeyPatch, local_cluster: LocalCluster
) -> None:
    prefix = new_prefix()
    monkeypatch.setenv("REDIS_URL", local_cluster.url)
    monkeypatch.setenv("REDISKV_CLUSTER", "true")
    monkeypatch.setenv("REDISKV_STORE_PREFIX", prefix)
    async with store() as memory:
        assert isinstance(memory.client, AsyncRedisCluster)
        for i in range(6):
            await memory.aput(("users", f"u{i}"), "k", {"i": i})
        assert [i.value["i"] for i in await memory.asearch(("users",), limit=3)] == [5, 4, 3]
        assert len(await memory.alist_namespaces()) == 6
        await memory.abatch([PutOp(("users", f"u{i}"), "k", None) for i in range(6)])
        assert await memory.alist_namespaces() == []


async def test_rediskv_cluster_on_a_standalone_server_is_named(
    monkeypatch: pytest.MonkeyPatch, server_url: str
) -> None:
    monkeypatch.setenv("REDIS_URL", server_url)
    monkeypatch.setenv("REDISKV_CLUSTER", "true")
    with pytest.raises(SettingsError) as failed:
        async with store():
            pass
    assert str(failed.value).startswith(
        "REDISKV_CLUSTER='true' is invalid: cluster=True, but the server at redis://"
    )


@pytest.mark.parametrize("cluster", ["false", "true"])
async def test_an_unreachable_server_is_named(
    monkeypatch: pytest.MonkeyPatch, cluster: str
) -> None:
    monkeypatch.setenv("REDIS_URL", "redis://:secret@127.0.0.1:1/0")
    monkeypatch.setenv("REDISKV_CLUSTER", cluster)
    with pytest.raises(RedisUnavailableError) as failed:
        async with store():
            pass
    assert str(failed.value).startswith(
        "cannot reach Redis at redis://:***@127.0.0.1:1/0 (REDIS_URL)"
    )


# -- a real Agent Server ----------------------------------------------------------------------
@pytest.fixture
def memory_server(tmp_path: Path, server_url: str) -> Iterator[tuple[AgentServer, str, str]]:
    saver_prefix, store_prefix = new_prefix(), new_prefix()
    shutil.copy(MEMORY_GRAPH, tmp_path / "graph.py")
    (tmp_path / "embed.py").write_text(EMBED_SOURCE)
    (tmp_path / "langgraph.json").write_text(
        json.dumps(
            {
                "dependencies": ["."],
                "graphs": {"memory": "./graph.py:graph"},
                "checkpointer": {"path": SAVER_FACTORY},
                "store": {
                    "path": STORE_FACTORY,
                    "index": {"dims": 4, "embed": "./embed.py:embed", "fields": ["text"]},
                },
            }
        )
    )
    env = server_env(server_url, REDISKV_PREFIX=saver_prefix, REDISKV_STORE_PREFIX=store_prefix)
    server = AgentServer(tmp_path, env)
    client = redis.Redis.from_url(server_url)
    try:
        yield server, saver_prefix, store_prefix
    finally:
        server.stop()
        unlink_prefix(client, saver_prefix)
        unlink_prefix(client, store_prefix)
        client.close()


def texts(state: dict[str, Any]) -> list[str]:
    return [m["content"] for m in state["values"]["messages"]]


@pytest.mark.slow
async def test_agent_server_with_the_store(
    memory_server: tuple[AgentServer, str, str], server_url: str, client: redis.Redis
) -> None:
    """Both factories in one langgraph.json: the graph remembers through get_store(), the
    store API over HTTP sees the same items, a query ranks them with the deployment's
    embedder, and a restart keeps them."""
    from langgraph_sdk import get_client

    server, saver_prefix, store_prefix = memory_server
    server.start()
    log = server.log()
    assert "Using custom store: <langgraph.store.rediskv.AsyncRedisStore object at" in log, log
    assert f"rediskv store: {server_url}, prefix {store_prefix!r}, ttl none, index 4 dims" in log
    sdk = get_client(url=server.url)
    ada = {"configurable": {"user_id": "ada"}}

    # two threads of one user share what the graph remembers through get_store()
    first, second = (
        (await sdk.threads.create())["thread_id"],
        (await sdk.threads.create())["thread_id"],
    )
    await sdk.runs.wait(first, "memory", input=human("I like tea", "m1"), config=ada)
    await sdk.runs.wait(second, "memory", input=human("I have cats", "m2"), config=ada)
    state = await sdk.threads.get_state(second)
    assert texts(state) == ["I have cats", "I remember: I like tea; I have cats"]

    # the server's store API reads and writes the same items
    item = await sdk.store.get_item(["memories", "ada"], "m1")
    assert (item["namespace"], item["key"], item["value"]) == (
        ["memories", "ada"],
        "m1",
        {"text": "I like tea"},
    )
    await sdk.store.put_item(["memories", "bob"], "b1", {"text": "dogs, dogs and coffee"})
    listed = await sdk.store.list_namespaces(prefix=["memories"])
    assert sorted(tuple(ns) for ns in listed["namespaces"]) == [
        ("memories", "ada"),
        ("memories", "bob"),
    ]
    # semantic search with the deployment's embedder (./embed.py, named in langgraph.json)
    found = await sdk.store.search_items(["memories"], query="tea, tea or coffee")
    assert [(i["key"], i["score"]) for i in found["items"]] == [
        ("m1", pytest.approx(2 / 5**0.5)),
        ("b1", pytest.approx(1 / (5**0.5 * 5**0.5))),
        ("m2", 0.0),
    ]
    # every key of the store is under its own prefix, none under the saver's
    store_keys = keys_under(client, store_prefix)
    assert store_keys and all(k.startswith(f"{store_prefix}:") for k in store_keys)
    assert not any(":memories" in k for k in keys_under(client, saver_prefix))

    # a restart keeps every memory, and a delete goes through
    server.stop()
    server.start()
    sdk = get_client(url=server.url)
    await sdk.store.delete_item(["memories", "bob"], "b1")
    found = await sdk.store.search_items(["memories"], query="cats")
    assert [(i["key"], i["score"]) for i in found["items"]] == [("m2", 1.0), ("m1", 0.0)]
    await sdk.runs.wait(first, "memory", input=human("and coffee", "m3"), config=ada)
    state = await sdk.threads.get_state(first)
    assert texts(state) == [
        "I like tea",
        "I remember: I like tea",
        "and coffee",
        "I remember: I like tea; I have cats; and coffee",
    ]
