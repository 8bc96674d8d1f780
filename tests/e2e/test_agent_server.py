"""The LangGraph Agent Server factory (``langgraph.checkpoint.rediskv.server:checkpointer``).

Fast tests of its settings and errors, then a real Agent Server (``langgraph dev`` from
``langgraph-cli[inmem]``) with the factory in its ``langgraph.json``, driven over HTTP with
``langgraph-sdk``: runs, state, history, a fork, a copy, a rollback, a delete, a restart.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import empty_checkpoint

from langgraph.checkpoint.rediskv import AsyncRedisSaver, RedisUnavailableError
from langgraph.checkpoint.rediskv.core import thread_indexed
from langgraph.checkpoint.rediskv.keys import metadata_index_suffix
from langgraph.checkpoint.rediskv.server import (
    ENV_VARS,
    ServerSettings,
    SettingsError,
    checkpointer,
    settings_from_env,
)

from ..conftest import _free_port, new_prefix

GRAPH_SOURCE = Path(__file__).parents[1] / "agent_server" / "graph.py"
FACTORY_PATH = "langgraph.checkpoint.rediskv.server.checkpointer"


# -- settings ---------------------------------------------------------------------------------
def test_defaults() -> None:
    settings = settings_from_env({})
    assert settings == ServerSettings(
        url="redis://localhost:6379/0",
        url_from_env=False,
        prefix="lg",
        ttl_minutes=None,
        refresh_on_read=False,
        cluster=False,
        compression=True,
        keep_last=None,
        index_metadata=("run_id",),
    )
    assert settings.saver_kwargs() == {
        "prefix": "lg",
        "ttl": None,
        "cluster": False,
        "compression": True,
        "keep_last": None,
        "index_metadata": ("run_id",),
    }


def test_every_variable() -> None:
    env = {
        "REDIS_URL": "rediss://user:secret@cache.example:6380/2",
        "REDISKV_PREFIX": "agents.prod",
        "REDISKV_TTL_MINUTES": "90.5",
        "REDISKV_TTL_REFRESH_ON_READ": "Yes",
        "REDISKV_CLUSTER": "off",
        "REDISKV_COMPRESSION": "9",
        "REDISKV_KEEP_LAST": "25",
        "REDISKV_INDEX_METADATA": " run_id, user_id ,run_id",
        "UNRELATED": "x",
    }
    settings = settings_from_env(env)
    assert settings == ServerSettings(
        url="rediss://user:secret@cache.example:6380/2",
        url_from_env=True,
        prefix="agents.prod",
        ttl_minutes=90.5,
        refresh_on_read=True,
        cluster=False,
        compression=9,
        keep_last=25,
        index_metadata=("run_id", "user_id"),
    )
    assert settings.saver_kwargs() == {
        "prefix": "agents.prod",
        "ttl": {"default_ttl": 90.5, "refresh_on_read": True},
        "cluster": False,
        "compression": 9,
        "keep_last": 25,
        "index_metadata": ("run_id", "user_id"),
    }
    assert settings.describe() == (
        "rediss://user:***@cache.example:6380/2 (REDIS_URL), prefix 'agents.prod', "
        "ttl 90.5 min (refreshed on read), cluster False, compression 9, keep_last 25, "
        "index_metadata ['run_id', 'user_id']"
    )
    assert ENV_VARS == (
        "REDIS_URL",
        "REDISKV_PREFIX",
        "REDISKV_TTL_MINUTES",
        "REDISKV_TTL_REFRESH_ON_READ",
        "REDISKV_CLUSTER",
        "REDISKV_COMPRESSION",
        "REDISKV_KEEP_LAST",
        "REDISKV_INDEX_METADATA",
    )


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({"REDISKV_COMPRESSION": "true"}, True),
        ({"REDISKV_COMPRESSION": "ON"}, True),
        ({"REDISKV_COMPRESSION": "1"}, 1),
        ({"REDISKV_COMPRESSION": "22"}, 22),
        ({"REDISKV_COMPRESSION": "false"}, False),
        ({"REDISKV_COMPRESSION": "0"}, False),
        ({"REDISKV_COMPRESSION": ""}, True),
    ],
)
def test_compression_values(env: dict[str, str], expected: bool | int) -> None:
    compression = settings_from_env(env).compression
    assert compression == expected
    assert type(compression) is type(expected)


def test_empty_variables_count_as_unset() -> None:
    env = {name: "" for name in ENV_VARS} | {"REDISKV_PREFIX": "  "}
    assert settings_from_env(env) == settings_from_env({})


def test_cluster_and_no_index() -> None:
    settings = settings_from_env({"REDISKV_CLUSTER": "true", "REDISKV_INDEX_METADATA": "none"})
    assert (settings.cluster, settings.index_metadata) == (True, ())
    assert settings_from_env({"REDISKV_INDEX_METADATA": "NONE"}).index_metadata == ()
    assert settings_from_env({"REDISKV_TTL_MINUTES": "1"}).saver_kwargs()["ttl"] == {
        "default_ttl": 1.0,
        "refresh_on_read": False,
    }


def test_reads_os_environ(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REDIS_URL", "redis://elsewhere:7000/3")
    monkeypatch.setenv("REDISKV_PREFIX", "from-env")
    settings = settings_from_env()
    assert (settings.url, settings.url_from_env, settings.prefix) == (
        "redis://elsewhere:7000/3",
        True,
        "from-env",
    )


BAD_SETTINGS = [
    (
        {"REDIS_URL": "http://user:hunter2@host:6379"},
        "REDIS_URL='http://user:***@host:6379' is invalid: use a redis://, rediss:// or "
        "unix:// URL, e.g. redis://localhost:6379/0",
    ),
    (
        {"REDISKV_PREFIX": "my:app"},
        "REDISKV_PREFIX='my:app' is invalid: use 1-64 characters from A-Z a-z 0-9 _ . - "
        "(no ':' or spaces)",
    ),
    (
        {"REDISKV_PREFIX": "x" * 65},
        f"REDISKV_PREFIX='{'x' * 65}' is invalid: use 1-64 characters from A-Z a-z 0-9 _ . - "
        "(no ':' or spaces)",
    ),
    (
        {"REDISKV_TTL_MINUTES": "1h"},
        "REDISKV_TTL_MINUTES='1h' is invalid: use a positive number of minutes "
        "(e.g. 60 or 0.5), or leave it unset for none",
    ),
    (
        {"REDISKV_TTL_MINUTES": "0"},
        "REDISKV_TTL_MINUTES='0' is invalid: use a positive number of minutes "
        "(e.g. 60 or 0.5), or leave it unset for none",
    ),
    (
        {"REDISKV_TTL_MINUTES": "-5"},
        "REDISKV_TTL_MINUTES='-5' is invalid: use a positive number of minutes "
        "(e.g. 60 or 0.5), or leave it unset for none",
    ),
    (
        {"REDISKV_TTL_MINUTES": "inf"},
        "REDISKV_TTL_MINUTES='inf' is invalid: use a positive number of minutes "
        "(e.g. 60 or 0.5), or leave it unset for none",
    ),
    (
        {"REDISKV_TTL_MINUTES": "nan"},
        "REDISKV_TTL_MINUTES='nan' is invalid: use a positive number of minutes "
        "(e.g. 60 or 0.5), or leave it unset for none",
    ),
    (
        {"REDISKV_TTL_MINUTES": "60", "REDISKV_TTL_REFRESH_ON_READ": "sometimes"},
        "REDISKV_TTL_REFRESH_ON_READ='sometimes' is invalid: use true or false "
        "(also 1/0, yes/no, on/off)",
    ),
    (
        {"REDISKV_TTL_REFRESH_ON_READ": "true"},
        "REDISKV_TTL_REFRESH_ON_READ='true' is invalid: it needs REDISKV_TTL_MINUTES "
        "(there is no expiry to refresh)",
    ),
    (
        {"REDISKV_CLUSTER": "2"},
        "REDISKV_CLUSTER='2' is invalid: use true or false (also 1/0, yes/no, on/off)",
    ),
    (
        {"REDISKV_COMPRESSION": "zstd"},
        "REDISKV_COMPRESSION='zstd' is invalid: use true (zstd level 1), false (store "
        "uncompressed) or a zstd level 1-22",
    ),
    (
        {"REDISKV_COMPRESSION": "23"},
        "REDISKV_COMPRESSION='23' is invalid: use true (zstd level 1), false (store "
        "uncompressed) or a zstd level 1-22",
    ),
    (
        {"REDISKV_KEEP_LAST": "0"},
        "REDISKV_KEEP_LAST='0' is invalid: use the number of newest checkpoints to keep per "
        "thread (1 or more), or leave it unset to keep all",
    ),
    (
        {"REDISKV_KEEP_LAST": "ten"},
        "REDISKV_KEEP_LAST='ten' is invalid: use the number of newest checkpoints to keep per "
        "thread (1 or more), or leave it unset to keep all",
    ),
    (
        {"REDISKV_INDEX_METADATA": "run_id,,user_id"},
        "REDISKV_INDEX_METADATA='run_id,,user_id' is invalid: use metadata keys separated by "
        "commas (e.g. run_id,user_id), or none",
    ),
    (
        {"REDISKV_CLUSTER": "yes", "REDISKV_INDEX_METADATA": "user_id"},
        "REDISKV_INDEX_METADATA='user_id' is invalid: a cluster (REDISKV_CLUSTER) has no "
        "global metadata index; leave it unset",
    ),
    (
        {"REDISKV_TTL": "60"},
        "REDISKV_TTL='60' is invalid: unknown variable; known: REDISKV_PREFIX, "
        "REDISKV_TTL_MINUTES, REDISKV_TTL_REFRESH_ON_READ, REDISKV_CLUSTER, "
        "REDISKV_COMPRESSION, REDISKV_KEEP_LAST, REDISKV_INDEX_METADATA, "
        "REDISKV_STORE_PREFIX",
    ),
]


@pytest.mark.parametrize(("env", "message"), BAD_SETTINGS)
async def test_bad_setting_fails_at_start(env: dict[str, str], message: str) -> None:
    with pytest.raises(SettingsError) as caught:
        settings_from_env(env)
    assert str(caught.value) == message
    assert caught.value.variable == message.split("=")[0]
    with pytest.raises(SettingsError) as entered:
        async with checkpointer(environ=env):
            raise AssertionError("entered despite a bad setting")
    assert str(entered.value) == message


async def test_unreachable_server_names_the_url() -> None:
    port = _free_port()  # nothing listens there
    env = {"REDIS_URL": f"redis://agent:s3cret@127.0.0.1:{port}/0"}
    with pytest.raises(RedisUnavailableError) as caught:
        async with checkpointer(environ=env):
            raise AssertionError("entered without a server")
    message = str(caught.value)
    assert message.startswith(
        f"cannot reach Redis at redis://agent:***@127.0.0.1:{port}/0 (REDIS_URL): "
    )
    assert "s3cret" not in message


async def test_unreachable_default_url_says_redis_url_is_unset() -> None:
    settings = ServerSettings(url=f"redis://127.0.0.1:{_free_port()}/0")
    from langgraph.checkpoint.rediskv import server

    saver = AsyncRedisSaver(settings.url, retries=0)
    try:
        with pytest.raises(RedisUnavailableError) as caught:
            await server._check_reachable(saver, settings)
    finally:
        await saver.aclose()
    assert str(caught.value).startswith(
        f"cannot reach Redis at {settings.url} (the default; REDIS_URL is unset): "
    )


async def test_factory_yields_a_configured_saver(server_url: str, prefix: str) -> None:
    env = {
        "REDIS_URL": server_url,
        "REDISKV_PREFIX": prefix,
        "REDISKV_TTL_MINUTES": "30",
        "REDISKV_INDEX_METADATA": "run_id,user_id",
    }
    async with checkpointer(environ=env) as saver:
        assert isinstance(saver, AsyncRedisSaver)
        assert saver.prefix == prefix
        assert saver.indexed_metadata == ("run_id", "user_id")
        config: RunnableConfig = {"configurable": {"thread_id": "t1", "checkpoint_ns": ""}}
        checkpoint = empty_checkpoint()
        stored = await saver.aput(config, checkpoint, {"source": "input", "step": -1}, {})
        got = await saver.aget_tuple(stored)
        assert got is not None
        assert got.checkpoint["id"] == checkpoint["id"]
        key = f"{prefix}:cp:{{t1}}::{checkpoint['id']}"
        ttl = await saver.client.ttl(key)
        assert timedelta(minutes=29) < timedelta(seconds=ttl) <= timedelta(minutes=30)
        await saver.adelete_thread("t1")
        assert await saver.client.exists(key) == 0


# -- a real Agent Server -------------------------------------------------------------------
ANSI = re.compile(r"\x1b\[[0-9;]*m")
DEGRADED = (
    "Custom checkpointer missing",  # adelete_thread, adelete_for_runs, acopy_thread, aprune
    "does not implement the expected checkpointer protocol",
)


def langgraph_cli() -> str:
    """The ``langgraph`` command next to this Python (the test extra installs it)."""
    cli = Path(sys.executable).parent / "langgraph"
    if cli.exists():
        return str(cli)
    found = shutil.which("langgraph")
    if found is None:
        pytest.fail(
            "the langgraph CLI is missing: pip install -e '.[test]' (it installs "
            "langgraph-cli[inmem])"
        )
    return found


class AgentServer:
    """``langgraph dev`` in ``directory``, on a free loopback port, in its own process group."""

    def __init__(self, directory: Path, env: dict[str, str]) -> None:
        self.directory = directory
        self.env = env
        self.process: subprocess.Popen[bytes] | None = None
        self.log_path = directory / "server-0.log"
        self.starts = 0
        self.url = ""

    def log(self) -> str:
        return ANSI.sub("", self.log_path.read_text(errors="replace"))

    def start(self, timeout: float = 90) -> None:
        port = _free_port()
        self.url = f"http://127.0.0.1:{port}"
        self.log_path = self.directory / f"server-{self.starts}.log"
        self.starts += 1
        command = [
            langgraph_cli(),
            "dev",
            "--no-browser",
            "--no-reload",
            "--port",
            str(port),
            "--host",
            "127.0.0.1",
        ]
        with self.log_path.open("wb") as log:
            self.process = subprocess.Popen(
                command,
                cwd=self.directory,
                env=self.env,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        deadline = time.monotonic() + timeout
        while True:
            if self.process.poll() is not None:
                raise AssertionError(
                    f"langgraph dev exited with {self.process.returncode}:\n{self.log()}"
                )
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"{self.url}/ok", timeout=1).status_code == 200:
                    return
            if time.monotonic() > deadline:
                raise AssertionError(f"langgraph dev did not answer in {timeout}s:\n{self.log()}")
            time.sleep(0.2)

    def start_and_fail(self, timeout: float = 90) -> int:
        """Start, expecting the server to give up; its exit code."""
        try:
            self.start(timeout)
        except AssertionError as failed:
            assert self.process is None or self.process.poll() is not None, str(failed)
            assert self.process is not None
            return self.process.returncode
        raise AssertionError(f"langgraph dev started:\n{self.log()}")

    def stop(self) -> None:
        process, self.process = self.process, None
        if process is None or process.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait()
        with contextlib.suppress(ProcessLookupError):  # anything it left in its group
            os.killpg(process.pid, signal.SIGKILL)


def unlink_prefix(client: redis.Redis, prefix: str) -> None:
    keys = list(client.scan_iter(match=f"{prefix}:*", count=1000))
    if keys:
        client.unlink(*keys)


def keys_under(client: redis.Redis, prefix: str) -> list[str]:
    return sorted(k.decode() for k in client.scan_iter(match=f"{prefix}:*", count=1000))


def messages(state: dict[str, Any]) -> list[tuple[str, str, str]]:
    return [(m["type"], m["content"], m["id"]) for m in state["values"]["messages"]]


def human(text: str, message_id: str) -> dict[str, Any]:
    return {"messages": [{"type": "human", "content": text, "id": message_id}]}


def steps(history: list[dict[str, Any]]) -> list[tuple[int, str, int]]:
    return [
        (h["metadata"]["step"], h["metadata"]["source"], len(h["values"].get("messages", [])))
        for h in history
    ]


def server_env(server_url: str, **settings: str) -> dict[str, str]:
    """The environment of a `langgraph dev` in a test: this process's, without its REDISKV_
    variables, with REDIS_URL, ``settings`` and nothing sent out (no analytics, tracing or
    version check)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("REDISKV_")}
    return env | {
        "REDIS_URL": server_url,
        "LANGGRAPH_CLI_NO_ANALYTICS": "1",
        "LANGGRAPH_NO_VERSION_CHECK": "true",
        "LANGSMITH_TRACING": "false",
        "LANGCHAIN_TRACING_V2": "false",
        "PYTHONUNBUFFERED": "1",
        **settings,
    }


@pytest.fixture
def agent_server(tmp_path: Path, server_url: str) -> Iterator[tuple[AgentServer, str]]:
    prefix = new_prefix()
    shutil.copy(GRAPH_SOURCE, tmp_path / "graph.py")
    (tmp_path / "langgraph.json").write_text(
        json.dumps(
            {
                "dependencies": ["."],
                "graphs": {"chat": "./graph.py:graph"},
                "checkpointer": {"path": FACTORY_PATH},
            }
        )
    )
    server = AgentServer(tmp_path, server_env(server_url, REDISKV_PREFIX=prefix))
    client = redis.Redis.from_url(server_url)
    try:
        yield server, prefix
    finally:
        server.stop()
        unlink_prefix(client, prefix)
        client.close()


def assert_clean_start(server: AgentServer, prefix: str, server_url: str) -> None:
    log = server.log()
    assert "Using custom checkpointer: AsyncRedisSaver" in log, log
    assert (
        f"rediskv checkpointer: {server_url} (REDIS_URL), prefix {prefix!r}, ttl none, "
        "cluster False, compression True, keep_last None, index_metadata ['run_id']" in log
    ), log
    for warning in DEGRADED:
        assert warning not in log, log


async def wait_for(what: str, check: Any, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not await check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.1)


@pytest.mark.slow
async def test_agent_server(
    agent_server: tuple[AgentServer, str], server_url: str, client: redis.Redis
) -> None:
    from langgraph_sdk import get_client
    from langgraph_sdk.errors import NotFoundError

    server, prefix = agent_server
    server.start()
    assert_clean_start(server, prefix, server_url)
    sdk = get_client(url=server.url)

    # Three turns on thread A.
    a = (await sdk.threads.create())["thread_id"]
    turns = [("one", "h1"), ("two", "h2"), ("three", "h3")]
    for text, message_id in turns:
        await sdk.runs.wait(a, "chat", input=human(text, message_id))
    state = await sdk.threads.get_state(a)
    assert messages(state) == [
        ("human", "one", "h1"),
        ("ai", "echo 1: one", "ai-1"),
        ("human", "two", "h2"),
        ("ai", "echo 2: two", "ai-2"),
        ("human", "three", "h3"),
        ("ai", "echo 3: three", "ai-3"),
    ]
    assert state["next"] == []
    assert (state["metadata"]["step"], state["metadata"]["source"]) == (7, "loop")
    assert state["metadata"]["thread_id"] == a
    history = await sdk.threads.get_history(a, limit=100)
    assert steps(history) == [
        (7, "loop", 6),
        (6, "loop", 5),
        (5, "input", 4),
        (4, "loop", 4),
        (3, "loop", 3),
        (2, "input", 2),
        (1, "loop", 2),
        (0, "loop", 1),
        (-1, "input", 0),
    ]
    assert history[0]["checkpoint_id"] == state["checkpoint_id"]
    for newer, older in itertools.pairwise(history):
        assert newer["parent_checkpoint"]["checkpoint_id"] == older["checkpoint_id"]
    # Every key but the global indexes carries A's tag: the metadata index of run_id (one key
    # per run), and the threads-by-value indexes of the metadata's short strings (the
    # server's assistant_id, graph_id, ...)
    runs = sorted({h["metadata"]["run_id"] for h in history})
    assert len(runs) == 3
    by_value = sorted(
        {
            f"{prefix}:tm:{metadata_index_suffix(key, json.dumps(value))}"
            for h in history
            for key, value in h["metadata"].items()
            if isinstance(value, str) and thread_indexed(key, json.dumps(value))
        }
    )
    assert f"{prefix}:tm:graph_id:%22chat%22" in by_value
    assert [k for k in keys_under(client, prefix) if "{" + a + "}" not in k] == sorted(
        [f"{prefix}:mk"] + [f"{prefix}:mi:run_id:%22{run}%22" for run in runs] + by_value
    )
    assert all(client.zrange(k, 0, -1) == [("{" + a + "}").encode()] for k in by_value)

    # A fork: a state update on the checkpoint after the first turn, then a turn from it.
    first_turn = history[6]
    assert messages(first_turn) == [("human", "one", "h1"), ("ai", "echo 1: one", "ai-1")]
    fork = await sdk.threads.update_state(
        a,
        human("forked", "hf"),
        as_node="bot",
        checkpoint_id=first_turn["checkpoint_id"],
    )
    state = await sdk.threads.get_state(a)
    assert state["checkpoint_id"] == fork["checkpoint"]["checkpoint_id"]
    assert state["parent_checkpoint"]["checkpoint_id"] == first_turn["checkpoint_id"]
    assert (state["metadata"]["step"], state["metadata"]["source"]) == (2, "update")
    assert messages(state) == [
        ("human", "one", "h1"),
        ("ai", "echo 1: one", "ai-1"),
        ("human", "forked", "hf"),
    ]
    await sdk.runs.wait(a, "chat", input=human("after the fork", "h4"))
    state = await sdk.threads.get_state(a)
    assert messages(state) == [
        ("human", "one", "h1"),
        ("ai", "echo 1: one", "ai-1"),
        ("human", "forked", "hf"),
        ("human", "after the fork", "h4"),
        ("ai", "echo 3: after the fork", "ai-3"),
    ]
    history = await sdk.threads.get_history(a, limit=100)
    assert steps(history) == [
        (5, "loop", 5),
        (4, "loop", 4),
        (3, "input", 3),
        (2, "update", 3),
        (7, "loop", 6),
        (6, "loop", 5),
        (5, "input", 4),
        (4, "loop", 4),
        (3, "loop", 3),
        (2, "input", 2),
        (1, "loop", 2),
        (0, "loop", 1),
        (-1, "input", 0),
    ]

    # A copy: thread B, same checkpoints, same state.
    b = (await sdk.threads.copy(a))["thread_id"]
    assert b != a
    copied = await sdk.threads.get_state(b)
    assert copied["values"] == state["values"]
    assert copied["checkpoint_id"] == state["checkpoint_id"]
    copied_history = await sdk.threads.get_history(b, limit=100)
    assert [h["checkpoint_id"] for h in copied_history] == [h["checkpoint_id"] for h in history]
    assert [h["values"] for h in copied_history] == [h["values"] for h in history]

    # A rollback on B: a slow run is cancelled and its checkpoints deleted.
    slow = await sdk.runs.create(b, "chat", input=human("slow", "h-slow"))

    async def slow_run_is_stored() -> bool:
        run = await sdk.runs.get(b, slow["run_id"])
        current = await sdk.threads.get_state(b)
        return run["status"] == "running" and ("human", "slow", "h-slow") in messages(current)

    await wait_for("the slow run's first checkpoint", slow_run_is_stored)
    assert any(slow["run_id"] in k for k in keys_under(client, prefix))
    rollback = await sdk.runs.create(
        b, "chat", input=human("instead", "h5"), multitask_strategy="rollback"
    )
    await sdk.runs.join(b, rollback["run_id"])
    with pytest.raises(NotFoundError):
        await sdk.runs.get(b, slow["run_id"])
    b_state = await sdk.threads.get_state(b)
    assert messages(b_state) == [
        ("human", "one", "h1"),
        ("ai", "echo 1: one", "ai-1"),
        ("human", "forked", "hf"),
        ("human", "after the fork", "h4"),
        ("ai", "echo 3: after the fork", "ai-3"),
        ("human", "instead", "h5"),
        ("ai", "echo 4: instead", "ai-4"),
    ]
    assert b_state["metadata"]["run_id"] == rollback["run_id"]
    b_history = await sdk.threads.get_history(b, limit=100)
    assert len(b_history) == 16
    assert all(h["metadata"].get("run_id") != slow["run_id"] for h in b_history)
    assert not any(slow["run_id"] in k for k in keys_under(client, prefix))

    # A delete: no key of thread A is left (its hash tag, or in a metadata index).
    a_keys = [k for k in keys_under(client, prefix) if "{" + a + "}" in k]
    assert len(a_keys) > 0
    await sdk.threads.delete(a)
    assert [k for k in keys_under(client, prefix) if "{" + a + "}" in k] == []
    for key in keys_under(client, prefix):
        if ":mi:" in key:
            members = client.zrange(key, 0, -1)
            assert not any(("{" + a + "}").encode() in m for m in members), key
        if ":tm:" in key:
            assert ("{" + a + "}").encode() not in client.zrange(key, 0, -1), key
    with pytest.raises(NotFoundError):
        await sdk.threads.get_state(a)
    assert len([k for k in keys_under(client, prefix) if "{" + b + "}" in k]) > 0

    # A restart: thread B reads back the same.
    server.stop()
    server.start()
    assert_clean_start(server, prefix, server_url)
    sdk = get_client(url=server.url)
    assert await sdk.threads.get_state(b) == b_state
    assert await sdk.threads.get_history(b, limit=100) == b_history


@pytest.mark.slow
async def test_agent_server_refuses_to_start(
    agent_server: tuple[AgentServer, str], server_url: str
) -> None:
    """A bad setting and an unreachable server stop the start, named in the server's log."""
    server, _ = agent_server
    server.env["REDISKV_TTL_MINUTES"] = "1h"
    assert server.start_and_fail() == 3
    assert (
        "SettingsError: REDISKV_TTL_MINUTES='1h' is invalid: use a positive number of minutes "
        "(e.g. 60 or 0.5), or leave it unset for none" in server.log()
    ), server.log()
    assert "Application startup failed. Exiting." in server.log()

    del server.env["REDISKV_TTL_MINUTES"]
    port = _free_port()
    server.env["REDIS_URL"] = f"redis://agent:s3cret@127.0.0.1:{port}/0"
    assert server.start_and_fail() == 3
    log = server.log()
    assert (
        f"RedisUnavailableError: cannot reach Redis at redis://agent:***@127.0.0.1:{port}/0 "
        "(REDIS_URL): " in log
    ), log
    assert "s3cret" not in log
