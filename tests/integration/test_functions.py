"""The operations of a chat turn as a Redis Function library (functions.py): FCALL on a
standalone server, loaded again when lost, and scripts (EVALSHA) when functions are off, denied
or missing. Every test acts on a server of its own: they delete libraries and add ACL users."""

from __future__ import annotations

import asyncio
import hashlib
import re
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
import redis
from redis.exceptions import NoPermissionError, OutOfMemoryError, ResponseError

from langgraph.checkpoint.rediskv import AsyncRedisSaver, RedisSaver, ServerFullError, functions
from langgraph.checkpoint.rediskv.core import ScriptCall
from langgraph.checkpoint.rediskv.functions import FunctionLibrary, listed_libraries
from langgraph.checkpoint.rediskv.scripts import (
    FUNCTION_OPS,
    function_library,
    lua_dir,
    script_includes,
    script_sources,
)

from ..conftest import PrivateServer, new_prefix
from .test_contract import cfg, make_checkpoint

LIBRARY, SOURCE, NAMES = function_library()


class Sent:
    """What the server ran of the commands that call the operations, since the last take():
    FCALL, EVALSHA, FUNCTION LIST, FUNCTION LOAD, SCRIPT LOAD (commandstats of a server of
    the test's own; calls refused by the ACL or by maxmemory count too)."""

    NAMES = ("fcall", "evalsha", "function|list", "function|load", "script|load")

    def __init__(self, admin: redis.Redis) -> None:
        self.admin = admin
        self.seen = self._counts()

    def _counts(self) -> dict[str, int]:
        stats = self.admin.info("commandstats")
        counts = {}
        for name in self.NAMES:
            row = stats.get(f"cmdstat_{name}", {})
            counts[name] = int(row.get("calls", 0)) + int(row.get("rejected_calls", 0))
        return counts

    def take(self) -> dict[str, int]:
        now = self._counts()
        delta = {name: now[name] - self.seen[name] for name in self.NAMES}
        self.seen = now
        return {name: n for name, n in delta.items() if n}


@pytest.fixture
def server(private_server: PrivateServer) -> Iterator[redis.Redis]:
    admin = redis.Redis(port=private_server.port)
    yield admin
    admin.close()


@pytest.fixture
def sent(server: redis.Redis) -> Sent:
    return Sent(server)


def url_of(server: redis.Redis) -> str:
    return f"redis://127.0.0.1:{server.connection_pool.connection_kwargs['port']}/0"


def put_one(saver: RedisSaver, thread: str, step: int, parent: str | None = None) -> Any:
    version = f"{step:032}.0.1"
    checkpoint = make_checkpoint({"messages": f"turn {step} " * 200}, {"messages": version})
    return saver.put(
        cfg(thread, checkpoint_id=parent), checkpoint, {"source": "loop", "step": step},
        {"messages": version},
    )  # fmt: skip


def test_the_library_holds_each_operation_with_its_scripts_flags(server: redis.Redis) -> None:
    # named after the digest of the source: another version's library is another library
    assert re.fullmatch(r"rediskv_[0-9a-f]{16}", LIBRARY)
    unnamed = SOURCE.split("\n", 1)[1].replace(f"function_name = '{LIBRARY}_", "function_name = '@")
    assert hashlib.sha1(unnamed.encode()).hexdigest()[:16] == LIBRARY.removeprefix("rediskv_")
    assert {op: f"{LIBRARY}_{op}" for op in FUNCTION_OPS} == NAMES
    assert server.function_load(SOURCE) == LIBRARY.encode()
    [library] = server.function_list(library=LIBRARY)
    info = dict(zip(library[::2], library[1::2], strict=True))
    functions = {}
    for entry in info[b"functions"]:
        fields = dict(zip(entry[::2], entry[1::2], strict=True))
        functions[fields[b"name"].decode()] = sorted(f.decode() for f in fields[b"flags"])
    # the flags of each script's #!lua line: a put refused by a full server, a read not
    assert functions == {
        NAMES["put_checkpoint"]: [],
        NAMES["put_writes"]: [],
        NAMES["get_tuple"]: ["allow-oom"],
        NAMES["list_checkpoints"]: ["allow-oom"],
    }
    # the bodies are the scripts' own, their includes made once at the top
    for op in FUNCTION_OPS:
        own_part = (lua_dir() / f"{op}.lua").read_text().split("\n-- requires:", 1)[1]
        body = own_part.split("\n", 1)[1]  # after the requires line
        assert len(body) > 500 and body in SOURCE
    used = {include for op in FUNCTION_OPS for include in script_includes()[op]}
    assert used == {
        "replies",
        "keyschema",
        "refs",
        "expiry",
        "record",
        "indexes",
        "records",
        "drop",
        "trim",
        "lists",
        "ledger",
        "registry",
    }
    for include in sorted(used):
        text = (lua_dir() / "include" / f"{include}.lua").read_text()
        assert SOURCE.count(text) == 1
        # a helper made at load reads no KEYS or ARGV of its own: in a library those are
        # the callback's parameters, not globals
        code = re.sub(r"--\[\[.*?\]\]|--[^\n]*", "", text, flags=re.DOTALL)
        assert re.findall(r"\b(?:KEYS|ARGV)\b", code) == [], include


def test_a_chat_turn_goes_out_as_fcalls(server: redis.Redis, sent: Sent) -> None:
    url = url_of(server)
    with RedisSaver(url, prefix=new_prefix()) as saver:
        put_one(saver, "warm", 1)  # (a saver's first put registers its indexed keys first)
        server.function_flush()
        sent.take()
        first = put_one(saver, "t", 1)
        # the first call finds no library: it loads it, then calls again
        assert sent.take() == {"fcall": 2, "function|load": 1}
        second = put_one(saver, "t", 2, first["configurable"]["checkpoint_id"])
        saver.put_writes(second, [("messages", "w")], "task-1")
        got = saver.get_tuple(cfg("t"))
        assert sent.take() == {"fcall": 3}
        assert got is not None and got.config == second
        assert got.pending_writes == [("task-1", "messages", "w")]
        assert got.checkpoint["channel_values"]["messages"] == "turn 2 " * 200
        # a page of the thread's history too; other operations are scripts
        assert [t.config for t in saver.list(cfg("t"))] == [second, first]
        assert sent.take() == {"fcall": 1}
        saver.prune(["t"], strategy="keep_latest")
        assert "fcall" not in sent.take() and len(list(saver.list(cfg("t")))) == 1


async def test_concurrent_async_calls_go_out_as_fcalls_in_one_pipeline(
    server: redis.Redis, sent: Sent
) -> None:
    url = url_of(server)
    server.function_load(SOURCE)
    async with AsyncRedisSaver.from_conn_string(url, prefix=new_prefix()) as saver:
        await saver.aput(cfg("warm"), make_checkpoint({}, {}), {"step": 0}, {})
        sent.take()
        # the library is deleted while graphs run: the pipelined calls that find it gone
        # load it and go again
        server.function_delete(LIBRARY)
        puts = [
            saver.aput(cfg(f"t{i}"), make_checkpoint({"messages": f"m{i}"}, {"messages": "1"}),
                       {"step": i}, {"messages": "1"})
            for i in range(12)
        ]  # fmt: skip
        configs = await asyncio.gather(*puts)
        ran = sent.take()
        # (every call that found the library gone, and again after a load)
        assert "evalsha" not in ran and ran["function|load"] >= 1 and ran["fcall"] >= 12 + 1
        for i, config in enumerate(configs):
            got = await saver.aget_tuple(config)
            assert got is not None and got.checkpoint["channel_values"] == {"messages": f"m{i}"}
        assert sent.take() == {"fcall": 12}
        assert saver._library.enabled
    assert server.function_list(library=LIBRARY) != []


def test_a_lost_library_is_loaded_again(server: redis.Redis, sent: Sent) -> None:
    url = url_of(server)
    with RedisSaver(url, prefix=new_prefix()) as saver:
        first = put_one(saver, "t", 1)
        server.function_flush()
        sent.take()
        got = saver.get_tuple(first)
        assert sent.take() == {"fcall": 2, "function|load": 1}
        assert got is not None and got.checkpoint["channel_values"]["messages"] == "turn 1 " * 200
        assert [row[1] for row in server.function_list()] == [LIBRARY.encode()]


def test_functions_off_send_scripts(server: redis.Redis, sent: Sent) -> None:
    url = url_of(server)
    with RedisSaver(url, prefix=new_prefix(), functions=False) as saver:
        put_one(saver, "warm", 1)
        saver.get_tuple(cfg("warm"))
        sent.take()
        first = put_one(saver, "t", 1)
        assert saver.get_tuple(first) is not None
        assert sent.take() == {"evalsha": 2}
    assert server.function_list() == []


@pytest.mark.parametrize("denied", ["fcall", "function|load", "function|list"])
def test_an_acl_without_functions_falls_back_to_scripts(
    server: redis.Redis, sent: Sent, denied: str
) -> None:
    port = server.connection_pool.connection_kwargs["port"]
    commands = ["+@all", f"-{denied}"]
    server.acl_setuser("app", enabled=True, passwords=["+pw"], keys=["*"], commands=commands)
    with RedisSaver(f"redis://app:pw@127.0.0.1:{port}/0", prefix=new_prefix()) as saver:
        first = put_one(saver, "t", 1)
        # the library is listed (its code checked), loaded, called: the first refusal turns
        # functions off for the saver, and the call runs as a script
        ran = sent.take()
        tried = {name: ran.get(name, 0) for name in ("function|list", "function|load", "fcall")}
        assert (
            tried
            == {
                "fcall": {"function|list": 1, "function|load": 1, "fcall": 1},
                "function|load": {"function|list": 1, "function|load": 1, "fcall": 0},
                "function|list": {"function|list": 1, "function|load": 0, "fcall": 0},
            }[denied]
        )
        assert ran["evalsha"] >= 1 and not saver._library.enabled
        second = put_one(saver, "t", 2, first["configurable"]["checkpoint_id"])
        assert sent.take() == {"evalsha": 1}
        got = saver.get_tuple(cfg("t"))
        assert got is not None and got.config == second
        assert sent.take() == {"evalsha": 2, "script|load": 1}  # (its first: loaded)
    if denied != "fcall":
        assert server.function_list() == []


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@contextmanager
def configured(server: redis.Redis, name: str, value: str, after: str) -> Iterator[None]:
    """The server with one setting changed, set to ``after`` again at the end."""
    server.config_set(name, value)
    try:
        yield
    finally:
        server.config_set(name, after)


def refused_with_library_gone(server: redis.Redis, sent: Sent) -> tuple[RedisSaver, Clock, Any]:
    """A saver on a clock of the test's that has put a checkpoint, and then lost its library."""
    saver = RedisSaver(url_of(server), prefix=new_prefix())
    saver._library._clock = clock = Clock()
    first = put_one(saver, "t", 1)
    server.function_flush()
    sent.take()
    return saver, clock, first


def test_a_full_server_reads_without_loading_the_library(server: redis.Redis, sent: Sent) -> None:
    saver, clock, first = refused_with_library_gone(server, sent)
    with saver:
        with configured(server, "maxmemory", "1", after="0"):  # full at once (noeviction)
            got = saver.get_tuple(first)  # a read runs on a full server, as a script
            assert got is not None and got.config == first
            assert sent.take() == {"fcall": 1, "function|load": 1, "evalsha": 2, "script|load": 1}
            assert saver._library.enabled  # (a full server is no reason to stop using them)
            # for a while, calls go straight to the scripts: no load tried on every call
            assert saver.get_tuple(first) is not None
            with pytest.raises(ServerFullError, match="nothing was written"):
                put_one(saver, "t", 2, first["configurable"]["checkpoint_id"])
            assert sent.take() == {"evalsha": 3, "script|load": 1}
        second = put_one(saver, "t", 2, first["configurable"]["checkpoint_id"])
        assert sent.take() == {"evalsha": 1}
        clock.now += functions.RETRY_AFTER  # then the library is tried again
        saver.put_writes(second, [("messages", "w")], "task-1")
        assert sent.take() == {"function|list": 1, "function|load": 1, "fcall": 1}
        got = saver.get_tuple(cfg("t"))
        assert got is not None and got.config == second and sent.take() == {"fcall": 1}


def test_a_refusal_that_passes_keeps_functions_on(server: redis.Redis, sent: Sent) -> None:
    saver, clock, first = refused_with_library_gone(server, sent)
    with saver:
        # writes refused (NOREPLICAS): FUNCTION LOAD, and the scripts, as they may write
        with configured(server, "min-replicas-to-write", "1", after="0"):
            with pytest.raises(ResponseError, match="NOREPLICAS"):
                saver.get_tuple(first)
            ran = sent.take()
            assert ran["fcall"] == 1 and ran["function|load"] == 1 and ran["evalsha"] >= 1
        assert saver._library.enabled
        clock.now += functions.RETRY_AFTER
        assert saver.get_tuple(first) is not None
        assert sent.take() == {"function|list": 1, "function|load": 1, "fcall": 1}


def test_a_library_of_that_name_with_other_code_is_not_used(
    server: redis.Redis, sent: Sent, caplog: pytest.LogCaptureFixture
) -> None:
    # another user of the server took the library's name first (FUNCTION LOAD needs no key):
    # its functions would run with the saver's permissions
    prefix = new_prefix()
    planted = "\n".join(
        [f"#!lua name={LIBRARY}"]
        + [
            f"redis.register_function('{name}', function(keys, args) "
            f"redis.call('SET', '{prefix}:planted', '1') return 1 end)"
            for name in NAMES.values()
        ]
    )
    server.function_load(planted)
    url = url_of(server)
    with caplog.at_level("WARNING"), RedisSaver(url, prefix=prefix) as saver:
        first = put_one(saver, "t", 1)
        got = saver.get_tuple(first)
        assert got is not None and got.config == first
        ran = sent.take()
        assert "fcall" not in ran and ran["function|list"] == 1 and ran["evalsha"] >= 2
        assert not saver._library.enabled
    assert server.get(f"{prefix}:planted") is None
    assert f"the Redis function library {LIBRARY} on the server is not this saver's code" in (
        caplog.text
    )


async def test_a_batch_call_that_fails_alone_fails_alone(server: redis.Redis) -> None:
    # calls batched by the auto-pipeline that must go again alone (their function or script
    # gone): one that fails (a put on a full server) does not fail the reads beside it
    url = url_of(server)
    async with AsyncRedisSaver.from_conn_string(url, prefix=new_prefix()) as saver:
        config = await saver.aput(
            cfg("t"), make_checkpoint({"messages": "m"}, {"messages": "1"}), {"step": 1},
            {"messages": "1"},
        )  # fmt: skip
        server.function_flush()
        server.config_set("maxmemory", "1")
        try:
            calls = [saver.aget_tuple(config) for _ in range(6)] + [
                saver.aput(cfg("t", checkpoint_id=config["configurable"]["checkpoint_id"]),
                           make_checkpoint({"messages": f"n{i}"}, {"messages": f"{i + 2}"}),
                           {"step": i + 2}, {"messages": f"{i + 2}"})
                for i in range(2)
            ]  # fmt: skip
            results = await asyncio.gather(*calls, return_exceptions=True)
        finally:
            server.config_set("maxmemory", "0")
        assert [r.config if not isinstance(r, Exception) else None for r in results[:6]] == [
            config
        ] * 6
        assert [type(r) for r in results[6:]] == [ServerFullError, ServerFullError]


def _call(name: str) -> ScriptCall:
    return ScriptCall(name, ("k",), ("a", 1))


def test_which_errors_are_the_librarys() -> None:
    library = FunctionLibrary()
    assert library.serves(_call("put_checkpoint")) and not library.serves(_call("prune"))
    assert library.fcall_args(_call("get_tuple")) == (NAMES["get_tuple"], 1, "k", "a", 1)
    # gone: load it again, functions stay on
    assert library.call_failed(ResponseError("Function not found")) and library.enabled
    # the operation's own errors, a command denied or unknown inside the function among them
    for own in (
        ResponseError("ERR user_function:12: corrupt checkpoint record"),
        NoPermissionError("this user has no permissions to run the 'time' command"),
        ResponseError("Unknown command called from script script: x, on @user_function:3."),
        ResponseError("Unknown Redis command called from script script: x, on @user_function"),
        OutOfMemoryError("command not allowed when used memory > 'maxmemory'."),
    ):
        assert not library.call_failed(own) and library.enabled
    for refusal in (
        NoPermissionError("User app has no permissions to run the 'fcall' command"),
        ResponseError("unknown command 'FCALL', with args beginning with: 'x'"),
    ):
        library = FunctionLibrary()
        assert library.call_failed(refusal) and not library.enabled
        assert not library.serves(_call("put_checkpoint"))
    library = FunctionLibrary(clock=(clock := Clock()))
    assert library.load_failed(ResponseError(f"Library '{LIBRARY}' already exists"))
    assert library.enabled and not library.verified  # (someone's library: to be compared)
    # refusals that pass: the scripts for RETRY_AFTER seconds, then the library again
    for passing in (
        OutOfMemoryError("command not allowed when used memory > 'maxmemory'."),
        ResponseError("NOREPLICAS Not enough good replicas to write."),
        ResponseError("READONLY You can't write against a read only replica."),
    ):
        assert not library.load_failed(passing) and library.enabled
        assert not library.serves(_call("put_checkpoint"))
        clock.now += functions.RETRY_AFTER
        assert library.serves(_call("put_checkpoint"))
    for refusal in (
        ResponseError("Error compiling function: user_function:2: '=' expected"),
        NoPermissionError("this user has no permissions to run the 'function|load' command"),
        ResponseError("unknown command 'FUNCTION'"),
    ):
        library = FunctionLibrary()
        assert not library.load_failed(refusal) and not library.enabled
    assert not FunctionLibrary(enabled=False).serves(_call("put_checkpoint"))


def test_the_library_is_used_once_its_listed_code_is_this_savers() -> None:
    library = FunctionLibrary()
    assert not library.ready(_call("get_tuple"))  # (not checked yet)
    assert not library.listed([]) and library.enabled  # not there: to be loaded
    resp2 = [[b"library_name", LIBRARY.encode(), b"engine", b"LUA", b"functions", [],
              b"library_code", SOURCE.encode()]]  # fmt: skip
    resp3 = [{"library_name": LIBRARY, "engine": "LUA", "library_code": SOURCE}]
    for listing in (resp2, resp3):
        library = FunctionLibrary()
        assert library.listed(listing) and library.ready(_call("get_tuple"))
    other = [{"library_name": LIBRARY, "engine": "LUA", "library_code": SOURCE + "--\n"}]
    library = FunctionLibrary()
    assert not library.listed(other) and not library.enabled
    # a library refused to be listed is not used unchecked
    library = FunctionLibrary()
    library.list_failed(NoPermissionError("no permissions to run the 'function|list' command"))
    assert not library.enabled
    library = FunctionLibrary()
    library.loaded()
    assert library.ready(_call("put_writes"))
    assert library.call_failed(ResponseError("Function not found"))
    assert not library.verified  # whatever is loaded next is checked again


def test_calls_of_other_threads_and_prefixes_in_turn_keep_to_their_keys(
    server: redis.Redis, sent: Sent
) -> None:
    # the library keeps the last thread's keyspace between calls (keyschema.lua): a call of
    # another thread, or of the same thread under another prefix, must not use it
    url = url_of(server)
    prefix_a, prefix_b = new_prefix(), new_prefix()
    with RedisSaver(url, prefix=prefix_a) as a, RedisSaver(url, prefix=prefix_b) as b:
        configs = {}
        for step, (saver, thread) in enumerate([(a, "t"), (b, "t"), (a, "u"), (a, "t")], 1):
            parent = configs.get((saver.prefix, thread))
            config = put_one(
                saver, thread, step, parent and parent["configurable"]["checkpoint_id"]
            )
            saver.put_writes(config, [("messages", f"w{step}")], f"task-{step}")
            configs[(saver.prefix, thread)] = config
        ran = sent.take()  # (each saver checks the library first; the first loads it)
        assert [ran["function|list"], ran["function|load"], ran["fcall"]] == [2, 1, 8]
        for (prefix, thread), config in configs.items():
            saver = a if prefix == prefix_a else b
            got = saver.get_tuple(cfg(thread))
            assert got is not None and got.config == config
        assert [
            len(list(a.list(cfg("t")))),
            len(list(a.list(cfg("u")))),
            len(list(b.list(cfg("t")))),
            len(list(b.list(cfg("u")))),
        ] == [2, 1, 1, 0]
        b_keys = sorted(k.decode().split(":")[1] for k in server.scan_iter(f"{prefix_b}:*"))
        assert b_keys.count("cp") == 1 and b_keys.count("blob") == 1
        assert a.check_invariants() == [] and b.check_invariants() == []


def test_doctor_reports_the_library_and_those_of_other_versions(server: redis.Redis) -> None:
    from langgraph.checkpoint.rediskv.cli.inspect import _functions_check

    def detail() -> tuple[str, str]:
        check = _functions_check(server)
        return check["status"], check["detail"]

    assert detail() == ("info", f"{LIBRARY} not loaded yet (loaded on first use)")
    url = url_of(server)
    with RedisSaver(url, prefix=new_prefix()) as saver:
        put_one(saver, "t", 1)
    assert detail() == ("ok", f"{LIBRARY} loaded")
    old = "rediskv_0123456789abcdef"
    server.function_load(old_version(old))
    # (a user's own library named like one of the package's is not listed)
    server.function_load("#!lua name=rediskv_tools\nredis.register_function('t_f', function() end)")
    assert detail() == (
        "ok",
        f"{LIBRARY} loaded; 1 of other versions ({old}): `rediskv libraries --delete-old` "
        "deletes them",
    )
    server.function_delete(old)
    server.function_load(SOURCE.replace("-- The key schema:", "-- changed"), replace=True)
    assert detail() == (
        "warn",
        f"{LIBRARY} holds other code than this version's: savers run scripts instead "
        f"(FUNCTION DELETE {LIBRARY}, then a restart of their processes, lets them load their "
        "own)",
    )


def test_a_connection_that_drops_function_commands_turns_them_off(
    server: redis.Redis, sent: Sent, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a proxy that closes the connection on commands it does not know (FUNCTION, FCALL)
    with RedisSaver(url_of(server), prefix=new_prefix()) as saver:
        saver._library._clock = clock = Clock()
        original = saver._client.execute_command

        def dropping(*args: Any, **options: Any) -> Any:
            if str(args[0]).upper().startswith(("FCALL", "FUNCTION")):
                raise redis.exceptions.ConnectionError("Connection closed by server.")
            return original(*args, **options)

        monkeypatch.setattr(saver._client, "execute_command", dropping)
        first = put_one(saver, "t", 1)  # each call goes through, as a script
        for step in range(2, 1 + functions.DROPS_TO_TURN_OFF):  # (the first put's was one)
            assert saver._library.enabled
            clock.now += functions.RETRY_AFTER  # (tried again after a pause)
            put_one(saver, "t", step, first["configurable"]["checkpoint_id"])
        assert not saver._library.enabled
        got = saver.get_tuple(cfg("t"))
        assert got is not None and got.metadata["step"] == functions.DROPS_TO_TURN_OFF
        assert "fcall" not in sent.take()


def test_a_server_that_is_down_fails_the_call(private_server: PrivateServer) -> None:
    saver = RedisSaver(private_server.url, prefix=new_prefix(), retries=0, connect_timeout=0.5)
    with saver:
        put_one(saver, "t", 1)
        private_server.stop()
        with pytest.raises(redis.exceptions.ConnectionError):
            saver.get_tuple(cfg("t"))
        assert saver._library.enabled  # (one failure is no reason to stop using them)


def test_concurrent_first_calls_check_and_load_the_library_once(
    server: redis.Redis, sent: Sent
) -> None:
    import concurrent.futures

    with RedisSaver(url_of(server), prefix=new_prefix(), max_connections=32) as saver:
        put_one(saver, "warm", 1)  # (registers the indexed keys)
        server.function_flush()
        saver._library.verified = False  # as a new saver finds it
        sent.take()
        with concurrent.futures.ThreadPoolExecutor(16) as pool:
            configs = list(pool.map(lambda i: put_one(saver, f"t{i}", 1), range(32)))
        ran = sent.take()
        assert (ran["function|list"], ran["function|load"], ran["fcall"]) == (1, 1, 32)
        assert [saver.get_tuple(c).config for c in configs] == configs


async def test_concurrent_first_async_calls_check_and_load_the_library_once(
    server: redis.Redis, sent: Sent
) -> None:
    async with AsyncRedisSaver.from_conn_string(
        url_of(server), prefix=new_prefix(), auto_pipeline=False
    ) as saver:
        gets = [saver.aget_tuple(cfg(f"t{i}")) for i in range(32)]
        assert await asyncio.gather(*gets) == [None] * 32
        ran = sent.take()
        assert (ran["function|list"], ran["function|load"], ran["fcall"]) == (1, 1, 32)


def test_a_library_holding_the_savers_function_names_is_not_replaced(
    server: redis.Redis, sent: Sent, caplog: pytest.LogCaptureFixture
) -> None:
    prefix = new_prefix()
    server.function_load(
        "#!lua name=other\n"
        + "".join(
            f"redis.register_function('{name}', function() return 1 end)\n"
            for name in NAMES.values()
        )
    )
    sent.take()
    with caplog.at_level("WARNING"), RedisSaver(url_of(server), prefix=prefix) as saver:
        first = put_one(saver, "t", 1)
        assert saver.get_tuple(first).config == first
        assert not saver._library.enabled
    ran = sent.take()  # tried once, then never again
    assert (ran["function|list"], ran["function|load"], ran.get("fcall", 0)) == (1, 1, 0)
    assert "holds this saver's function names" in caplog.text


def test_doctor_counts_the_operations_of_a_loaded_library_as_loaded(server: redis.Redis) -> None:
    from langgraph.checkpoint.rediskv.cli.inspect import _scripts_check

    names = list(script_sources())
    with_library = sorted(FUNCTION_OPS, key=names.index)
    assert _scripts_check(server, None) == {
        "check": "scripts",
        "status": "info",
        "detail": f"0 of {len(names)} loaded; the others load on first use",
    }
    url = url_of(server)
    with RedisSaver(url, prefix=new_prefix()) as saver:
        # through the library (the saver checks the store's format and registers its
        # indexes first, with scripts)
        put_one(saver, "t", 1)
        saver.delete_thread("t")  # a script
    loaded = [
        name
        for name in names
        if name not in FUNCTION_OPS
        and server.script_exists(hashlib.sha1(script_sources()[name].encode()).hexdigest())[0]
    ]
    # (and the delete's forget in the registry of live threads, core/deadlines.py)
    assert sorted(loaded) == [
        "delete_thread",
        "register_metadata_index",
        "store_format",
        "thread_deadlines",
    ]
    not_yet = [name for name in names if name not in FUNCTION_OPS and name not in loaded]
    assert _scripts_check(server, LIBRARY) == {
        "check": "scripts",
        "status": "info",
        "detail": f"4 of {len(names)} loaded; {len(with_library)} more run as functions of "
        f"{LIBRARY}; the others load on first use",
    }
    # without the library (functions off, or another saver's code), they are scripts again
    assert _scripts_check(server, None)["detail"] == (
        f"4 of {len(names)} loaded; the others load on first use"
    )
    for name in not_yet:
        server.script_load(script_sources()[name])
    assert _scripts_check(server, LIBRARY) == {
        "check": "scripts",
        "status": "ok",
        "detail": f"{len(names) - len(with_library)} of {len(names)} loaded; "
        f"{len(with_library)} more run as functions of {LIBRARY}",
    }


def old_version(name: str) -> str:
    """A library as an earlier version of the package would have loaded it."""
    return (
        f"#!lua name={name}\nredis.register_function{{function_name = '{name}_put_checkpoint', "
        "callback = function() return 1 end}"
    )


def test_libraries_command_lists_and_deletes_those_of_other_versions(
    server: redis.Redis,
) -> None:
    from ..e2e.test_cli import Cli, strict_json

    url, prefix = url_of(server), new_prefix()
    cli = Cli(url, prefix)
    assert strict_json(cli.ok("libraries", "--json")) == {
        "library": LIBRARY, "state": "not loaded", "others": [], "deleted": [],
    }  # fmt: skip
    with RedisSaver(url, prefix=prefix) as saver:
        put_one(saver, "t", 1)
        olds = ["rediskv_0000000000000001", "rediskv_0000000000000002"]
        for old in olds:
            server.function_load(old_version(old))
        # the user's own libraries, whatever their names, are not the package's
        server.function_load("#!lua name=mine\nredis.register_function('mine_f', function() end)")
        server.function_load(
            "#!lua name=rediskv_tools\nredis.register_function('my_helper', function() end)"
        )
        server.function_load(
            "#!lua name=rediskv_00000000000000ff\nredis.register_function('x_f', function() end)"
        )
        assert cli.ok("libraries").splitlines() == [
            f"{LIBRARY} (this version): loaded",
            f"{olds[0]}: another version's",
            f"{olds[1]}: another version's",
            "(--delete-old deletes the libraries of other versions)",
        ]
        assert strict_json(cli.ok("libraries", "--delete-old", "--json")) == {
            "library": LIBRARY, "state": "loaded", "others": [], "deleted": olds,
        }  # fmt: skip
        # this version's library and the user's own stay, and the saver goes on through it
        names = sorted(listed_libraries(server.function_list(withcode=True)))
        assert names == sorted([LIBRARY, "mine", "rediskv_tools", "rediskv_00000000000000ff"])
        put_one(saver, "t", 2, parent=None)
        assert saver.get_tuple(cfg("t")).metadata["step"] == 2  # type: ignore[union-attr]
    # a library of this version's name but other code: its savers run scripts until deleted
    server.function_load(SOURCE.replace("-- The key schema:", "-- changed"), replace=True)
    assert cli.ok("libraries").splitlines() == [
        f"{LIBRARY} (this version): other code",
        f"  savers of this version run scripts until FUNCTION DELETE {LIBRARY} and a restart "
        "of their processes",
    ]
    # a user without FUNCTION DELETE: what was deleted, what was not and why, exit code 2
    for old in olds:
        server.function_load(old_version(old))
    server.acl_setuser("nodelete", enabled=True, passwords=["+pw"], keys=["*"],
                       commands=["+@all", "-function|delete"])  # fmt: skip
    limited = Cli(url.replace("redis://", "redis://nodelete:pw@"), prefix)
    as_json, as_text = limited.run_many(
        ["libraries", "--delete-old", "--json"], ["libraries", "--delete-old"]
    )
    # (the server's words: Redis says "this user", Valkey "User nodelete")
    with (
        redis.Redis.from_url(url, username="nodelete", password="pw") as nodelete,
        pytest.raises(NoPermissionError) as denied,
    ):
        nodelete.function_delete(olds[0])
    assert "has no permissions to run the 'function|delete' command" in str(denied.value)
    why = f"FUNCTION DELETE is not allowed ({denied.value})"
    assert as_json.returncode == 2 and as_json.stderr == ""
    assert strict_json(as_json.stdout) == {
        "library": LIBRARY, "state": "other code", "others": olds, "deleted": [],
        "failed": [{"library": old, "error": why} for old in olds],
    }  # fmt: skip
    assert as_text.returncode == 2 and as_text.stderr == ""
    assert as_text.stdout.splitlines()[2:] == [
        f"{olds[0]}: another version's; not deleted: {why}",
        f"{olds[1]}: another version's; not deleted: {why}",
        "2 of 2 libraries not deleted (exit code 2)",
    ]
    assert set(olds) <= set(listed_libraries(server.function_list()))
