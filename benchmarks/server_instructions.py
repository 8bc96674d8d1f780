"""Instructions the Redis server executes per script call, counted by callgrind: a figure that
does not move with the machine's load, for A/B comparisons of script changes on a shared VM
(where server CPU time moves by 20% between identical runs).

    python benchmarks/server_instructions.py                      # this checkout
    python benchmarks/server_instructions.py --trees ../old,.     # two checkouts, side by side
    python benchmarks/server_instructions.py --turns 20 --ops put,writes
    python benchmarks/server_instructions.py --ops turn --saver plainredis   # the peer's turn
    python benchmarks/server_instructions.py --ops turn --warm 300 --keep-history  # a long chat
    python benchmarks/server_instructions.py --ops turn --keep-last 3   # a saver that trims
    python benchmarks/server_instructions.py --no-functions   # every call as EVALSHA

Each tree (a checkout with src/ and lua/) is measured in a child process with that tree's
src/ first on PYTHONPATH: a redis-server of its own runs under `valgrind --tool=callgrind`
with instrumentation off, cost.py's chat conversation (benchmarks/cost.py) is written for
--warm turns (20) through AsyncRedisSaver, then for each op the next --turns turns' calls of
that kind are sent with instrumentation on (get: the latest checkpoint, 20 times; list: a
page of 10 of the thread's checkpoints, 10 times; turn: every call of the next --turns
turns, counted per turn, which is the issue's unit). With --keep-history the chat keeps
every message instead of cost.py's window of 20, so its `messages` grows turn by turn. The
count is every instruction of the server process in that span (its cron too: run at hz 1),
divided by the calls: userland only, so the kernel's share of a request (its socket reads
and writes) is not in it. Needs valgrind (callgrind_control) and redis-server; connects to
no other server.
"""

from __future__ import annotations

import argparse
import asyncio
import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

OPS = ("put", "writes", "get", "list", "turn")
LISTS = 10  # list: a page of 10 checkpoints of the thread, 10 times
SAVERS = ("rediskv", "plainredis")
GETS = 20


def _total(path: str) -> int:
    with open(path) as f:
        for line in f:
            if line.startswith("totals:"):
                return int(line.split()[1])
    raise RuntimeError(f"no totals in {path}")


def _control(*args: str) -> None:
    subprocess.run(["callgrind_control", *args], capture_output=True, check=False)


def _open_saver(kind: str, url: str, keep_last: int | None = None, functions: bool = True) -> Any:
    if kind == "plainredis":
        from langgraph_checkpoint_plainredis import AsyncRedisSaver as PlainAsyncRedisSaver

        return PlainAsyncRedisSaver(url=url, prefix="instr")
    from langgraph.checkpoint.rediskv import AsyncRedisSaver

    return AsyncRedisSaver(url, prefix="instr", keep_last=keep_last, functions=functions)


async def measure(ops: list[str], turns: int, redis_server: str,
                  saver_kind: str = "rediskv", warm: int = 20,
                  keep_history: bool = False, keep_last: int | None = None,
                  functions: bool = True) -> dict[str, float]:
    """Instructions per call of each op (per turn for "turn"), for the package importable
    here, or for plainredis."""
    import cost  # benchmarks/cost.py: the conversation, free_port
    import redis

    if keep_history:
        cost.WINDOW = 1 << 30

    folder = tempfile.mkdtemp(prefix="rediskv-callgrind-")
    port = cost.free_port()
    proc = subprocess.Popen(
        ["valgrind", "--tool=callgrind", "--instr-atstart=no",
         f"--callgrind-out-file={folder}/out.%p", redis_server, "--port", str(port),
         "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", folder,
         "--hz", "1"],  # (its cron runs once a second: less of it in the count)
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    url = f"redis://127.0.0.1:{port}/0"
    admin = redis.Redis.from_url(url, socket_timeout=120)
    saver = None
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                admin.ping()
                break
            except redis.ConnectionError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise SystemExit(f"{redis_server} under callgrind did not start") from None
                time.sleep(0.1)
        saver = _open_saver(saver_kind, url, keep_last, functions)
        conv = cost.conversation(saver, "instr-thread", "user-1", 1_000)  # (its versions)
        await cost.run_turns(saver, conv, warm)
        calls = list(conv.turns(turns))
        result: dict[str, float] = {}
        for op in ops:
            if op == "turn":  # turns not yet written: the others' calls are, by now
                chosen, per = list(conv.turns(turns)), turns
            elif op == "get":
                chosen, per = [calls[0]] * GETS, GETS
            elif op == "list":
                chosen, per = [], LISTS
            else:
                chosen = [c for c in calls if c.kind == op]
                per = len(chosen)
            _control("-z", str(proc.pid))
            _control("-i", "on", str(proc.pid))
            for call in chosen:
                await cost.apply(saver, call)
            if op == "list":
                for _ in range(LISTS):
                    assert len([t async for t in saver.alist(calls[0].config, limit=10)]) == 10
            _control("-i", "off", str(proc.pid))
            before = set(glob.glob(f"{folder}/out.*"))
            _control("-d", op, str(proc.pid))
            dumps = sorted(set(glob.glob(f"{folder}/out.*")) - before)
            if not dumps:
                raise SystemExit("callgrind_control wrote no dump")
            result[op] = _total(dumps[-1]) / per
        return result
    finally:
        if saver is not None:
            await saver.aclose()
        admin.close()
        proc.terminate()
        proc.wait()
        shutil.rmtree(folder, ignore_errors=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trees", default=".", help="comma-separated checkouts (default: .)")
    parser.add_argument("--ops", default=",".join(OPS), help=f"comma-separated: {','.join(OPS)}")
    parser.add_argument("--turns", type=int, default=30, help="turns whose calls are counted")
    parser.add_argument("--warm", type=int, default=20, help="turns written before counting")
    parser.add_argument("--keep-history", action="store_true",
                        help="the chat keeps every message (cost.py keeps a window of 20)")
    parser.add_argument("--keep-last", type=int, default=None,
                        help="the saver's keep_last (rediskv; default: none, every checkpoint)")
    parser.add_argument("--no-functions", action="store_true",
                        help="rediskv runs every call as a script (EVALSHA), not as FCALL")
    parser.add_argument("--saver", choices=SAVERS, default="rediskv",
                        help="plainredis: the peer, measured the same way (--trees ignored)")
    parser.add_argument("--redis-server", default=shutil.which("redis-server") or "redis-server")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    ops = [op for op in args.ops.split(",") if op]
    if unknown := set(ops) - set(OPS):
        raise SystemExit(f"unknown ops {sorted(unknown)}: choose from {', '.join(OPS)}")
    if args.child:
        print(json.dumps(asyncio.run(measure(ops, args.turns, args.redis_server, args.saver,
                                             args.warm, args.keep_history, args.keep_last,
                                             not args.no_functions))))
        return 0
    if not shutil.which("callgrind_control"):
        raise SystemExit("valgrind is needed (apt-get install valgrind)")
    rows = []
    trees = args.trees.split(",") if args.saver == "rediskv" else ["."]
    for tree in trees:
        src = Path(tree).resolve() / "src"
        env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(src), str(Path(__file__).parent)]))
        child = subprocess.run(
            [sys.executable, __file__, "--child", "--ops", args.ops, "--turns", str(args.turns),
             "--redis-server", args.redis_server, "--saver", args.saver,
             "--warm", str(args.warm), *(["--keep-history"] if args.keep_history else []),
             *(["--keep-last", str(args.keep_last)] if args.keep_last else []),
             *(["--no-functions"] if args.no_functions else [])],
            env=env, capture_output=True, text=True, check=False,
        )
        if child.returncode:
            raise SystemExit(f"{tree}: {child.stderr[-2000:]}")
        label = tree if args.saver == "rediskv" else args.saver
        rows.append((label, json.loads(child.stdout.strip().splitlines()[-1])))
    print("| tree | " + " | ".join(
        f"{op} (instructions per {'turn' if op == 'turn' else 'call'})" for op in ops) + " |")
    print("|---|" + "--:|" * len(ops))
    for tree, counts in rows:
        print(f"| {tree} | " + " | ".join(f"{counts[op]:,.0f}" for op in ops) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
