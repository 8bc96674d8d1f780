"""Code of the benchmarks that the suite runs small, so that the tools keep working as the
saver changes: ``benchmarks/bench.py --profile``'s stage breakdown."""

from __future__ import annotations

import importlib
import random
import re
from pathlib import Path
from types import ModuleType

import pytest

from langgraph.checkpoint.rediskv import AsyncRedisSaver

BENCHMARKS = Path(__file__).parents[2] / "benchmarks"


@pytest.fixture
def bench(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    """benchmarks/bench.py, imported as its script runs (its folder on sys.path)."""
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    return importlib.import_module("bench")


async def test_the_profiles_stage_breakdown_reads_a_thread_whose_bases_the_saver_holds(
    async_saver: AsyncRedisSaver, bench: ModuleType
) -> None:
    """``bench.py --profile`` crashed in its stage breakdown ("does not decompress with its
    base") since get_tuple names the bases the saver holds by their marks: the script sends
    b"" for those, and the breakdown read the thread's values against b"" instead of the
    base the saver holds."""
    rng = random.Random(1)
    reader = bench.ThreadBuilder("micro-read", bench.chat_values(rng, "u-read"), "u-read")
    writer = bench.ThreadBuilder("micro-write", bench.chat_values(rng, "u-write"), "u-write")
    puts = [reader.next()]
    first_messages = reader.versions["messages"]  # (the base of the later ones)
    puts += [reader.next(), reader.next(), writer.next()]
    for args in puts:
        await async_saver.aput(args.config, args.checkpoint, args.metadata, args.new_versions)
    # the saver holds the base of the thread's messages: get_tuple names it
    request = next(async_saver._core.get_tuple(reader.config()))
    assert request.args[5:7] == (1, f"messages:{first_messages}".encode())
    report = bench.stage_breakdown(async_saver, reader, writer.next(), 2)
    stages = [line.split(" | ")[:2] for line in report.splitlines() if line.startswith("| a")]
    # (the last: the put's, whose count of arguments and bytes are the saver's own)
    assert re.fullmatch(r"pack_command \(EVALSHA, \d+ args, [\d,]+ bytes\)", stages[-1][1])
    assert [stage for _, stage in stages[:-1]] == [
        "serde: loads of ck, md, 10 values, 0 writes (decompressed)",
        "core: decode_record minus serde",
        "core: build the request (keys, args)",
        "pack_command (EVALSHA; in C: packing.py)",
        "serde: dumps_typed of body, metadata, 3 new values",
        "core: build the request minus serde (keys, canonical metadata, refs, "
        "b'type\\0data' copies)",
    ]
