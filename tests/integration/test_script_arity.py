"""Every script call the savers send has as many KEYS and ARGV as the script's header says (its
``Counts:`` line, read by tests/script_headers.py). The fixed part
agrees with the highest KEYS[i] / ARGV[i] the header describes, and the calls recorded across a
representative set of operations (sync and async savers, functions on and off) fit."""

from __future__ import annotations

import asyncio
import hashlib
import re
from collections import defaultdict
from collections.abc import Iterator
from typing import Any

import pytest
import redis

from langgraph.checkpoint.rediskv import AsyncRedisSaver, RedisSaver
from langgraph.checkpoint.rediskv.scripts import SCRIPT_NAMES, function_library, script_sources

from ..conftest import new_prefix
from ..script_headers import Spec, header, header_counts
from .test_contract import cfg, make_checkpoint


def _highest(header: str, kind: str) -> int:
    """The highest position the header names: KEYS[3], ARGV[4..7] (7), ARGV[5..] (5)."""
    found = re.findall(rf"\b{kind}\[(\d+)(?:\.\.(\d*)\w*)?\]", header)
    return max((int(end or start) for start, end in found), default=0)


def test_each_header_counts_what_it_describes() -> None:
    counts = header_counts()
    assert sorted(counts) == sorted(SCRIPT_NAMES)
    for name, specs in counts.items():
        text = header(name)
        for kind, spec in zip(("KEYS", "ARGV"), specs, strict=True):
            highest = _highest(text, kind)
            if spec.most is None:  # open: the header describes at least the fixed part
                assert highest >= spec.fixed, (name, kind)
            else:  # bounded: it describes every position, the last included
                assert highest == spec.declared(), (name, kind)
    assert counts["put_writes"] == (Spec(3, 0, 3), Spec(6, 3, None))
    assert counts["list_thread_candidates"] == (Spec(1, 0, None), Spec(5, 0, 5))
    assert counts["export_thread"] == (Spec(1, 0, 1), Spec(8, 0, 9))


# --- the calls the savers send --------------------------------------------------------------


class Recorder:
    """(script, number of KEYS, number of ARGV) of every EVALSHA and FCALL sent."""

    def __init__(self) -> None:
        self.by_sha = {
            hashlib.sha1(source.encode()).hexdigest(): name
            for name, source in script_sources().items()
        }
        self.by_function = {fn: op for op, fn in function_library()[2].items()}
        self.calls: dict[str, set[tuple[int, int]]] = defaultdict(set)

    def note(self, args: tuple[Any, ...]) -> None:
        command = str(args[0]).upper() if args else ""
        if command not in ("EVALSHA", "FCALL", "EVAL"):
            return
        target = args[1].decode() if isinstance(args[1], bytes) else str(args[1])
        if command == "EVAL":
            target = hashlib.sha1(target.encode()).hexdigest()
        name = self.by_function[target] if command == "FCALL" else self.by_sha[target]
        numkeys = int(args[2])
        self.calls[name].add((numkeys, len(args) - 3 - numkeys))


@pytest.fixture
def recorder(monkeypatch: pytest.MonkeyPatch) -> Iterator[Recorder]:
    recorder = Recorder()
    for cls in (
        redis.Redis,
        redis.client.Pipeline,
        redis.asyncio.Redis,
        redis.asyncio.client.Pipeline,
    ):
        original = cls.execute_command

        def wrapped(self: Any, *args: Any, __original: Any = original, **options: Any) -> Any:
            recorder.note(args)
            return __original(self, *args, **options)

        monkeypatch.setattr(cls, "execute_command", wrapped)
    yield recorder


def _put(saver: RedisSaver, thread: str, step: int, ns: str = "", run: str = "run-1") -> Any:
    version = f"{step:032}.0.1"
    checkpoint = make_checkpoint(
        {"messages": f"turn {step} " * 200, "small": step}, {"messages": version, "small": version}
    )
    return saver.put(
        cfg(thread, ns),
        checkpoint,
        {"source": "loop", "step": step, "run_id": run, "user": "u-1"},
        {"messages": version, "small": version},
    )


def _operations(saver: RedisSaver) -> None:
    stored = [_put(saver, "t1", step, run=f"run-{step % 2}") for step in range(4)]
    _put(saver, "t1", 9, ns="sub:1")
    saver.put_writes(stored[-1], [("messages", "w1"), ("small", 2)], "task-1")
    saver.put_writes(stored[-1], [("__error__", "boom")], "task-2")
    assert saver.get_tuple(cfg("t1")) is not None
    assert saver.get_tuple(stored[1]) is not None
    assert len(list(saver.list(cfg("t1"), limit=2))) == 2
    assert len(list(saver.list(cfg("t1"), filter={"source": "loop"}))) == 4
    assert len(list(saver.list(None, filter={"user": "u-1"}))) == 5
    assert len(list(saver.list(None, filter={"run_id": "run-1"}))) == 3
    saver.copy_thread("t1", "t2")
    saver.set_thread_ttl("t2", 3600)
    saver.pin_thread("t2")
    saver.prune(["t2"])
    saver.delete_for_runs(["run-0"])
    assert saver.reindex_metadata() >= 0
    assert saver.check_invariants() == []
    saver.delete_thread("t1")
    saver.delete_thread("t2")


@pytest.mark.parametrize("functions", [True, False])
def test_every_call_the_sync_saver_sends_fits_its_header(
    server_url: str, recorder: Recorder, functions: bool
) -> None:
    with RedisSaver(
        server_url, prefix=new_prefix(), functions=functions, index_metadata=["run_id", "user"]
    ) as saver:
        _operations(saver)
    _check(recorder)


def _check(recorder: Recorder, at_least: int = 16) -> None:
    counts = header_counts()
    for name, seen in recorder.calls.items():
        keys, args = counts[name]
        for key_count, arg_count in seen:
            assert keys.allows(key_count) and args.allows(arg_count), (name, key_count, arg_count)
    # the operations reach most scripts
    assert len(recorder.calls) >= at_least, sorted(recorder.calls)


async def _async_operations(saver: AsyncRedisSaver) -> None:
    stored = []
    for step in range(3):
        version = f"{step:032}.0.1"
        checkpoint = make_checkpoint({"messages": f"turn {step} " * 200}, {"messages": version})
        stored.append(
            await saver.aput(
                cfg("a1"), checkpoint, {"source": "loop", "step": step, "user": "u-2"},
                {"messages": version},
            )
        )  # fmt: skip
    await saver.aput_writes(stored[-1], [("messages", "w1")], "task-1")
    assert await saver.aget_tuple(cfg("a1")) is not None
    assert len([c async for c in saver.alist(cfg("a1"), limit=2)]) == 2
    assert len([c async for c in saver.alist(None, filter={"user": "u-2"})]) == 3
    await saver.aprune(["a1"])
    await saver.adelete_thread("a1")


@pytest.mark.parametrize("functions", [True, False])
def test_every_call_the_async_saver_sends_fits_its_header(
    server_url: str, recorder: Recorder, functions: bool
) -> None:
    async def run() -> None:
        async with AsyncRedisSaver(
            server_url, prefix=new_prefix(), functions=functions, index_metadata=["user"]
        ) as saver:
            await _async_operations(saver)

    asyncio.run(run())
    _check(recorder, at_least=7)


def test_a_count_off_the_header_is_caught() -> None:
    put_writes = header_counts()["put_writes"][1]
    assert [put_writes.allows(n) for n in (5, 6, 7, 8, 9, 12)] == [
        False, True, False, False, True, True
    ]  # fmt: skip
    export = header_counts()["export_thread"][1]
    assert [export.allows(n) for n in (7, 8, 9, 10)] == [False, True, True, False]
    assert Spec.parse("3..").allows(3) and not Spec.parse("3..").allows(2)
