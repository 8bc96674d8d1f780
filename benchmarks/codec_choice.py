#!/usr/bin/env python
"""Which codec for channel values: ratio and CPU of zstd, lz4 and zlib on chat checkpoints.

    python benchmarks/codec_choice.py             # Markdown table on stdout
    python benchmarks/codec_choice.py --quick     # fewer repetitions
    python benchmarks/codec_choice.py --json out.json

The input is what a chat checkpoint stores in its largest channel: the ``messages`` list
(alternating human and assistant messages of real prose, benchmarks/prose.py) serialized by
LangGraph's JsonPlusSerializer (msgpack), at 1 KB, about 12 KB (a 20-message window), 50 KB
and 200 KB. Each codec compresses and decompresses every value many times; the CPU is
``time.process_time`` over all repetitions, divided by the uncompressed kilobytes, so it
includes the Python binding's per-call overhead, which is what a saver pays. Compressor and
decompressor objects are made once and reused, as a saver would. The measurements run in 5
interleaved rounds and each cell is the median round.

(The file name shadows the standard library's ``codecs`` only for code that runs with
``benchmarks/`` first on ``sys.path`` and imports ``codecs`` late; Python imports the real
one at start-up, before the script's folder is added.)
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import lz4.frame
import prose  # benchmarks/prose.py: the script's folder is on sys.path
import zstandard
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

SIZES_KB = (1, 12, 50, 200)  # targets; each value is the first message list at least this big
BYTES_PER_MEASUREMENT = 8_000_000  # uncompressed bytes per (codec, size): enough CPU to time
QUICK_BYTES = 1_000_000
ROUNDS = 5


@dataclass(frozen=True)
class Codec:
    name: str
    compress: Callable[[bytes], bytes]
    decompress: Callable[[bytes], bytes]


def codecs() -> list[Codec]:
    out = []
    dctx = zstandard.ZstdDecompressor()
    for level in (1, 3, 6):
        cctx = zstandard.ZstdCompressor(level=level)  # writes the content size: one-shot decode
        out.append(Codec(f"zstd {level}", cctx.compress, dctx.decompress))
    out.append(Codec("lz4 frame (default, fast)", lz4.frame.compress, lz4.frame.decompress))
    out.append(Codec(
        "lz4 frame HC (level 9)",
        lambda b: lz4.frame.compress(b, compression_level=9),
        lz4.frame.decompress,
    ))
    out.append(Codec("zlib 6", lambda b: zlib.compress(b, 6), zlib.decompress))
    return out


def chat_values(seed: int = 7) -> list[tuple[int, bytes]]:
    """(target KB, msgpacked message list) for each of SIZES_KB, from one conversation."""
    serde = JsonPlusSerializer()
    chat = prose.ChatText(seed)
    messages: list[AnyMessage] = []
    out = []
    for target in SIZES_KB:
        while True:
            data = serde.dumps_typed(messages)[1]
            if len(data) >= target * 1000:
                out.append((target, data))
                break
            k = len(messages)
            if k % 2 == 0:
                messages.append(HumanMessage(content=chat.human(), id=f"h-{k}"))
            else:
                messages.append(AIMessage(
                    content=chat.assistant(), id=f"a-{k}",
                    response_metadata={"model_name": "bench-model-1", "finish_reason": "stop"},
                    usage_metadata={"input_tokens": 900 + 40 * k, "output_tokens": 180,
                                    "total_tokens": 1080 + 40 * k},
                ))
    return out


def cpu_per_kb(fn: Callable[[bytes], bytes], data: bytes, raw_size: int, reps: int) -> float:
    """CPU microseconds per uncompressed KB of ``fn(data)``, over ``reps`` calls."""
    cpu = time.process_time
    c0 = cpu()
    for _ in range(reps):
        fn(data)
    return (cpu() - c0) / reps / (raw_size / 1000) * 1e6


def measure(total_bytes: int, rounds: int = ROUNDS) -> dict[str, Any]:
    """Every (codec, size) ``rounds`` times, interleaved: round r visits every codec once, so
    a machine that slows down during the run slows every codec alike. Cells are medians."""
    values = chat_values()
    all_codecs = codecs()
    samples: dict[tuple[str, int], list[tuple[float, float]]] = {}
    packed_of: dict[tuple[str, int], bytes] = {}
    for codec in all_codecs:
        for target, data in values:
            packed_of[codec.name, target] = packed = codec.compress(data)
            assert codec.decompress(packed) == data
    for r in range(rounds):
        for codec in all_codecs:
            for target, data in values:
                packed = packed_of[codec.name, target]
                reps = max(10, total_bytes // rounds // len(data))
                samples.setdefault((codec.name, target), []).append((
                    cpu_per_kb(codec.compress, data, len(data), reps),
                    cpu_per_kb(codec.decompress, packed, len(data), reps),
                ))
        print(f"round {r + 1}/{rounds} done", file=sys.stderr, flush=True)
    rows: dict[str, Any] = {}
    for codec in all_codecs:
        rows[codec.name] = {
            target: {
                "bytes": len(data),
                "compressed": len(packed_of[codec.name, target]),
                "ratio": len(data) / len(packed_of[codec.name, target]),
                "compress_us_per_kb": statistics.median(
                    c for c, _ in samples[codec.name, target]),
                "decompress_us_per_kb": statistics.median(
                    d for _, d in samples[codec.name, target]),
            }
            for target, data in values
        }
    return {"sizes": {t: len(d) for t, d in values}, "rounds": rounds, "codecs": rows}


def markdown(result: dict[str, Any]) -> str:
    lines = ["| codec | ratio | compress µs/KB | decompress µs/KB |", "|---|--:|--:|--:|"]
    for name, per_size in result["codecs"].items():
        cells = [
            " / ".join(f"{per_size[t][key]:.{digits}f}" for t in SIZES_KB)
            for key, digits in (("ratio", 2), ("compress_us_per_kb", 1),
                                ("decompress_us_per_kb", 1))
        ]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer repetitions")
    parser.add_argument("--json", metavar="PATH", help="also write the results as JSON")
    args = parser.parse_args(argv)
    result = measure(QUICK_BYTES if args.quick else BYTES_PER_MEASUREMENT)
    print("## Codecs on a msgpacked chat `messages` value (JsonPlusSerializer, real prose)\n")
    sizes = " / ".join(f"{result['sizes'][t] / 1000:.1f}" for t in SIZES_KB)
    print(f"Each cell: values of {sizes} KB. Ratio = serialized bytes / compressed bytes; "
          "CPU = `time.process_time` per uncompressed KB, one core, Python binding "
          "included.\n")
    print(markdown(result))
    libzstd = ".".join(map(str, zstandard.ZSTD_VERSION))
    versions = (f"zstandard {zstandard.__version__} (libzstd {libzstd}), "
                f"lz4 {lz4.VERSION} (liblz4 {lz4.library_version_string()}), "
                f"zlib {zlib.ZLIB_RUNTIME_VERSION}")
    print(f"\n{versions}.")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({**result, "versions": versions}, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
