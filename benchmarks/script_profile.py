"""Where a script's server time goes: cost.py's chat conversation run through this package's
AsyncRedisSaver on a private redis-server, with the scripts cut into their phases.

    python benchmarks/script_profile.py                    # put_checkpoint, get_tuple, put_writes
    python benchmarks/script_profile.py --scripts put_checkpoint --turns 100

A phase is the stretch of a script between two top-level comments (lines that start with
"-- " in column 0 of lua/<name>.lua, which is how the scripts mark their steps) or its final
`return`. Before each, the profiled copy of the script reads the server's clock (`TIME`) and
adds the microseconds since the previous mark to a hash, so each phase's line shows its mean
time per call. The marks cost time of their own (about 1.5 µs each: the `TIME` and an
`HINCRBY`), so the phases add up to more than the unprofiled script takes; that figure,
`EVALSHA` usec per call from `INFO commandstats`, comes from a second run of the same calls
without marks. Calls that return early (a put whose shared blobs are missing) end after their
last mark. Nothing here connects to an existing server.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path
from typing import Any

import cost  # benchmarks/cost.py: the conversation, the private server
import redis

import langgraph.checkpoint.rediskv.async_connection as connection_module
from langgraph.checkpoint.rediskv import AsyncRedisSaver
from langgraph.checkpoint.rediskv.scripts import SCRIPT_NAMES, assemble, lua_dir

PROFILE_KEY = "__script_profile"
OPS = {"put_checkpoint": "put", "put_writes": "writes", "get_tuple": "get"}


def _mark(script: str, label: str) -> str:
    return (
        'do local t = redis.call("TIME"); local now = t[1] * 1000000 + t[2]; '
        f'if prof_at then redis.call("HINCRBY", "{PROFILE_KEY}", "{script}|{label}", '
        "now - prof_at) end; prof_at = now end\n"
    )


def profiled_source(name: str) -> tuple[str, list[str]]:
    """The script with a mark before each top-level comment and the final return, includes
    inlined; and the phase labels in order."""
    folder = lua_dir()
    text = (folder / f"{name}.lua").read_text()
    header_end = text.index("]]") + 3  # the header comment: no marks inside it
    lines = text[header_end:].splitlines(keepends=True)
    labels: list[str] = []
    out = [text[:header_end], "local prof_at = nil\n"]
    previous = "start"
    last_return = max(i for i, line in enumerate(lines) if line.startswith("return"))
    for i, line in enumerate(lines):
        top_comment = line.startswith("-- ") and not line.startswith("-- requires:")
        if (top_comment and not lines[i - 1].startswith("-- ")) or i == last_return:
            label = f"{len(labels) + 1:02d} {previous}"
            labels.append(label)
            out.append(_mark(name, label))
            previous = line[3:].strip()[:60] if top_comment else "(to the return)"
        out.append(line)
    return assemble("".join(out), folder, f"{name}.lua"), labels


async def run_calls(url: str, op_kind: str, turns: int, sources: dict[str, str]) -> tuple[int, int]:
    """Write a 30-turn conversation, then time the next `turns` turns' calls of one kind
    (get: the latest checkpoint, read as often as there are puts). Returns (calls, EVALSHA
    usec) for the timed calls."""
    # (the module that registers the scripts: patched there, the saver runs these sources)
    connection_module.script_sources = lambda: sources  # type: ignore[attr-defined]
    # as scripts: the profiled sources are the scripts' (a function library would run the
    # unmarked code, and keeps what it builds between calls: see server_instructions.py)
    saver = AsyncRedisSaver(url, prefix="prof", functions=False)
    r = redis.Redis.from_url(url)
    try:
        conv = cost.conversation(saver, f"t-{op_kind}-{id(sources)}", "u", 1_000)
        await cost.run_turns(saver, conv, 30)
        ops = list(conv.turns(turns))
        chosen = [op for op in ops if op.kind == op_kind]
        if op_kind == "get":
            chosen = [ops[0]] * len([op for op in ops if op.kind == "put"])
        r.delete(PROFILE_KEY)
        r.config_resetstat()
        for op in chosen:
            await cost.apply(saver, op)
        usec = r.info("commandstats").get("cmdstat_evalsha", {}).get("usec", 0)
        return len(chosen), int(usec)
    finally:
        await saver.aclose()
        r.close()


async def main_async(args: argparse.Namespace) -> int:
    from langgraph.checkpoint.rediskv.scripts import script_sources

    plain = dict(script_sources())
    server = cost.PrivateRedis(args.redis_server)
    try:
        r = redis.Redis.from_url(server.url)
        for name in args.scripts.split(","):
            if name not in OPS:
                raise SystemExit(f"unknown script {name!r}: one of {', '.join(OPS)}")
            calls, usec = await run_calls(server.url, OPS[name], args.turns, plain)
            source, labels = profiled_source(name)
            await run_calls(server.url, OPS[name], args.turns, {**plain, name: source})
            phases: dict[str, Any] = {
                k.decode().split("|", 1)[1]: int(v) for k, v in r.hgetall(PROFILE_KEY).items()
            }
            print(f"\n## {name}: {usec / calls:.1f} µs of EVALSHA per call without marks "
                  f"({calls} calls)\n")
            print("| phase (from the comment that starts it) | µs per call |")
            print("|---|--:|")
            for label in labels[1:]:  # (the first mark only starts the clock)
                print(f"| {label} | {phases.get(label, 0) / calls:.1f} |")
            print(f"| (sum, with the marks' own cost) | {sum(phases.values()) / calls:.1f} |")
        r.close()
    finally:
        server.stop()
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scripts", default=",".join(OPS), help="comma-separated: "
                        + ", ".join(OPS))
    parser.add_argument("--turns", type=int, default=60, help="turns whose calls are timed")
    parser.add_argument("--redis-server", default="redis-server")
    args = parser.parse_args()
    assert set(OPS) <= set(SCRIPT_NAMES)
    return asyncio.run(main_async(args))


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).parent))
    sys.exit(main())
