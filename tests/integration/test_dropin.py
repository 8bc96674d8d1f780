"""Users of langgraph-checkpoint-redis (the official saver) and of PostgresSaver switch by
changing the import: the official argument names, setup(), a client given positionally, the
shallow savers' names; and a keyword the saver does not know fails at construction."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import redis
import redis.asyncio as aredis

from langgraph.checkpoint.rediskv import (
    AsyncRedisSaver,
    AsyncShallowRedisSaver,
    RedisSaver,
    ShallowRedisSaver,
)

from ..conftest import LocalCluster, new_prefix
from .test_contract import cfg, make_checkpoint

ELSEWHERE = "redis://127.0.0.1:1/0"  # where nothing answers: $REDIS_URL must not be used


def put_and_read(saver: RedisSaver, thread_id: str, value: object) -> object:
    version = saver.get_next_version(None, None)
    saver.put(
        cfg(thread_id), make_checkpoint({"v": value}, {"v": version}), {"step": 0}, {"v": version}
    )
    tup = saver.get_tuple(cfg(thread_id))
    assert tup is not None
    return tup.checkpoint["channel_values"]["v"]


@pytest.fixture
def env_elsewhere(monkeypatch: pytest.MonkeyPatch) -> None:
    """$REDIS_URL names a server that does not answer: a saver that falls back on it fails."""
    monkeypatch.setenv("REDIS_URL", ELSEWHERE)


# -- the official saver's argument names ------------------------------------------------------


@pytest.mark.usefixtures("env_elsewhere")
def test_redis_url_is_the_url(server_url: str) -> None:
    with RedisSaver(redis_url=server_url, prefix=new_prefix()) as saver:
        assert put_and_read(saver, "t", 1) == 1
    with RedisSaver.from_conn_string(redis_url=server_url, prefix=new_prefix()) as saver:
        assert put_and_read(saver, "t", 2) == 2


@pytest.mark.usefixtures("env_elsewhere")
def test_redis_client_is_the_client(server_url: str) -> None:
    own = redis.Redis.from_url(server_url)
    with RedisSaver(redis_client=own, prefix=new_prefix()) as saver:
        assert put_and_read(saver, "t", "x") == "x"
    assert own.ping() is True  # a client handed in is never closed
    own.close()


@pytest.mark.usefixtures("env_elsewhere")
def test_a_client_given_positionally_is_the_client(server_url: str) -> None:
    own = redis.Redis.from_url(server_url)
    with RedisSaver(own, prefix=new_prefix()) as saver:
        assert saver.client is own
        assert put_and_read(saver, "t", 3) == 3
    own.close()


@pytest.mark.usefixtures("env_elsewhere")
def test_connection_args_are_redis_options(server_url: str) -> None:
    args = {"client_name": "dropin-test", "socket_keepalive": True}
    with RedisSaver(server_url, connection_args=args, prefix=new_prefix()) as saver:
        assert put_and_read(saver, "t", 4) == 4
        kwargs = saver.client.connection_pool.connection_kwargs  # type: ignore[union-attr]
        assert (kwargs["client_name"], kwargs["socket_keepalive"]) == ("dropin-test", True)


def test_checkpoint_prefix_is_the_prefix(server_url: str, client: redis.Redis) -> None:
    prefix = new_prefix()
    with RedisSaver(server_url, checkpoint_prefix=prefix) as saver:
        assert saver.prefix == prefix
        put_and_read(saver, "t", 5)
    assert client.keys(f"{prefix}:*") != []


@pytest.mark.usefixtures("env_elsewhere")
async def test_async_saver_takes_the_official_names(server_url: str) -> None:
    async with AsyncRedisSaver.from_conn_string(
        redis_url=server_url, connection_args={"client_name": "dropin"}, prefix=new_prefix()
    ) as saver:
        await saver.asetup()
        version = saver.get_next_version(None, None)
        await saver.aput(cfg("t"), make_checkpoint({"v": 6}, {"v": version}), {}, {"v": version})
        tup = await saver.aget_tuple(cfg("t"))
        assert tup is not None and tup.checkpoint["channel_values"] == {"v": 6}
    own = aredis.Redis.from_url(server_url)
    async with AsyncRedisSaver(own, prefix=new_prefix()) as saver:
        assert saver.client is own
    async with AsyncRedisSaver(redis_client=own, prefix=new_prefix()) as saver:
        assert saver.client is own
    await own.aclose()


# -- what is refused at construction ------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (
            {"sockettimeout": 1},
            "RedisSaver() got an unexpected keyword argument 'sockettimeout'; did you mean "
            "socket_timeout=?",
        ),
        (
            {"redis_ur": "redis://x"},
            "unexpected keyword argument 'redis_ur'; did you mean redis_url=?",
        ),
        ({"ssl_ca_certs": "/ca.pem"}, "it applies to TLS connections: use a rediss:// URL"),
        ({"connection_args": {"bogus": 1}}, "unexpected keyword argument 'bogus'"),
        ({"connection_args": "socket_timeout=1"}, "connection_args must be a dict"),
        (
            {"client_name": "a", "connection_args": {"client_name": "b"}},
            "got client_name both as keywords and in connection_args",
        ),
        ({"redis_url": "redis://a", "url": "redis://b"}, "got both url= and redis_url="),
        ({"checkpoint_write_prefix": "w"}, "takes no checkpoint_write_prefix= argument"),
        ({"key_cache_max_size": 10}, "takes no key_cache_max_size= argument"),
    ],
)
def test_a_keyword_the_saver_does_not_take_fails_at_once(
    kwargs: dict[str, Any], message: str
) -> None:
    with pytest.raises(TypeError) as raised:
        RedisSaver(**{"url": ELSEWHERE, **kwargs})
    assert message in str(raised.value)


def test_an_unknown_keyword_fails_on_the_async_saver_too() -> None:
    with pytest.raises(
        TypeError, match="AsyncRedisSaver\\(\\) got an unexpected keyword argument 'retry_count'"
    ):
        AsyncRedisSaver(ELSEWHERE, retry_count=3)


def test_options_beside_a_client_are_refused(server_url: str) -> None:
    own = redis.Redis.from_url(server_url)
    with pytest.raises(TypeError) as raised:
        RedisSaver(client=own, client_name="x")
    assert str(raised.value) == (
        "RedisSaver(): the connection options client_name apply to a connection the saver "
        "opens; with a client given, set them on that client"
    )
    own.close()


def test_a_client_of_the_other_kind_is_refused(server_url: str) -> None:
    sync_client = redis.Redis.from_url(server_url)
    with pytest.raises(TypeError) as raised:
        AsyncRedisSaver(sync_client)
    assert str(raised.value) == (
        "AsyncRedisSaver() takes a URL (a str) or a redis.asyncio.Redis or "
        "redis.asyncio.cluster.RedisCluster client as its first argument, not redis.client.Redis"
    )
    with pytest.raises(
        TypeError, match=r"needs a redis\.Redis or redis\.cluster\.RedisCluster client"
    ):
        RedisSaver(client=aredis.Redis.from_url(server_url))
    sync_client.close()


def test_the_official_redis_options_a_user_passes_are_taken(server_url: str) -> None:
    """Options of redis-py's connection a user of the official saver passes in
    connection_args (as the official saver's docs show) pass the check."""
    for option in ("health_check_interval", "retry_on_timeout", "username", "db", "encoding"):
        value: Any = {"username": "default", "encoding": "utf-8"}.get(option, 1)
        RedisSaver(server_url, connection_args={option: value}).close()


# -- setup -------------------------------------------------------------------------------------


def test_setup_loads_everything_and_can_run_again(server_url: str, client: redis.Redis) -> None:
    prefix = new_prefix()
    with RedisSaver(server_url, prefix=prefix) as saver:
        saver.setup()
        saver.setup()
        shas = [script.sha for script in saver._scripts.values()]
        assert client.script_exists(*shas) == [True] * len(shas)
        ready = {b"run_id": b"ready", b"\x00threads": b"ready"}  # (and threads-by-value)
        assert client.hgetall(f"{prefix}:mk") == ready
        assert put_and_read(saver, "t", 7) == 7
        saver.setup()
        assert client.hgetall(f"{prefix}:mk") == ready


def test_setup_of_a_saver_whose_server_is_down_names_it() -> None:
    from langgraph.checkpoint.rediskv import RedisUnavailableError

    with (
        RedisSaver(ELSEWHERE, retries=0, connect_timeout=1) as saver,
        pytest.raises(
            RedisUnavailableError, match=r"cannot reach Redis at redis://127\.0\.0\.1:1/0"
        ),
    ):
        saver.setup()


# -- a cluster node named without cluster=True --------------------------------------------------


@pytest.fixture(scope="module")
def cluster_node_url(local_cluster: LocalCluster) -> Iterator[str]:
    yield local_cluster.url


def test_a_cluster_node_without_cluster_true_fails_clearly(cluster_node_url: str) -> None:
    expected = "is a Redis Cluster node"
    with RedisSaver(cluster_node_url, prefix=new_prefix()) as saver:
        with pytest.raises(ValueError, match=f"{expected}: make the saver with cluster=True"):
            saver.setup()
        # without setup, the first call says the same (a MOVED or CROSSSLOT reply), for
        # threads of every slot; nothing is written
        for thread in ("a", "b", "c", "d"):
            with pytest.raises(ValueError, match=f"{expected} and refused a call"):
                put_and_read(saver, thread, 1)


async def test_the_async_saver_on_a_cluster_node_without_cluster_true(
    cluster_node_url: str,
) -> None:
    async with AsyncRedisSaver(cluster_node_url, prefix=new_prefix()) as saver:
        with pytest.raises(ValueError, match="make the saver with cluster=True"):
            await saver.asetup()
        for thread in ("a", "b", "c", "d"):
            version = saver.get_next_version(None, None)
            with pytest.raises(ValueError, match="is a Redis Cluster node and refused a call"):
                await saver.aput(
                    cfg(thread), make_checkpoint({"v": 1}, {"v": version}), {}, {"v": version}
                )


def test_setup_on_a_cluster_with_cluster_true(cluster_node_url: str) -> None:
    with RedisSaver(cluster_node_url, cluster=True, prefix=new_prefix()) as saver:
        saver.setup()
        saver.setup()
        assert put_and_read(saver, "t", 8) == 8


# -- the shallow savers ------------------------------------------------------------------------


def test_shallow_saver_keeps_the_newest_checkpoint_only(server_url: str) -> None:
    with ShallowRedisSaver(redis_url=server_url, prefix=new_prefix()) as saver:
        for value in range(3):
            put_and_read(saver, "t", value)
        assert [t.checkpoint["channel_values"]["v"] for t in saver.list(cfg("t"))] == [2]
    with pytest.raises(TypeError, match="ShallowRedisSaver keeps the newest checkpoint only"):
        ShallowRedisSaver(server_url, keep_last=3)


async def test_async_shallow_saver_keeps_the_newest_checkpoint_only(server_url: str) -> None:
    async with AsyncShallowRedisSaver.from_conn_string(server_url, prefix=new_prefix()) as saver:
        for value in range(3):
            version = saver.get_next_version(None, None)
            await saver.aput(
                cfg("t"), make_checkpoint({"v": value}, {"v": version}), {}, {"v": version}
            )
        assert [t.checkpoint["channel_values"]["v"] async for t in saver.alist(cfg("t"))] == [2]


# -- smaller things found on the way -----------------------------------------------------------


@pytest.mark.parametrize(
    ("source", "module", "package"),
    [
        (
            "sqlite:///x.db",
            "langgraph.checkpoint.sqlite",
            "pip install langgraph-checkpoint-sqlite",
        ),
        (
            "postgresql://u@h/db",
            "langgraph.checkpoint.postgres",
            "pip install langgraph-checkpoint-postgres 'psycopg[binary]'",
        ),
        (
            "langgraph-redis+redis://h:1/0",
            "langgraph.checkpoint.redis",
            "pip install langgraph-checkpoint-redis",
        ),
    ],
)
def test_migrate_from_a_source_whose_package_is_missing_names_the_package(
    source: str,
    module: str,
    package: str,
    server_url: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    import sys

    from langgraph.checkpoint.rediskv.__main__ import main

    monkeypatch.setitem(sys.modules, module, None)  # (its import fails as if not installed)
    assert main(["--url", server_url, "--prefix", new_prefix(), "migrate", "--from", source]) == 1
    kind = source.partition(":")[0].partition("+")[0]
    assert capsys.readouterr().err == (
        f"rediskv: error: reading a {kind} source needs the package that wrote it ({module} is "
        f"not installed): {package}\n"
    )
