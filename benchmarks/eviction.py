#!/usr/bin/env python
"""Issue 31's eviction scenario at its full size: what a chat backend sees when the server
evicts under memory pressure.

    python benchmarks/eviction.py                          # the three policies, this checkout
    python benchmarks/eviction.py --policies volatile-lru --chats 100
    PYTHONPATH=.cache/compat/<sha> python benchmarks/eviction.py   # release 0.1.0 (tests/compat)

For each policy: a private ``redis-server`` (the machine's) with ``maxmemory 30mb``; an
``AsyncRedisSaver(ttl={"default_ttl": 60, "refresh_on_read": True})``; 400 chats of 15 turns
through a LangGraph chat graph, 20 chats at a time, with real prose (benchmarks/prose.py);
then ``aget_state`` of every chat, as the app reads it. Each chat counts as:

- exact: the state holds every message of its last turn that went through;
- error: the read raised ``CheckpointLostError`` (``ThreadLostError``: evicted whole);
- empty: ``values == {}`` without an error (the conversation silently gone);
- older: an older state without an error (turns silently lost);
- wrong: anything else (a state that was never written): must be 0.

Also: the exact chats whose history (``aget_state_history``) raised, the keys the server
evicted (INFO), the turns that failed during the run (a turn whose read raised), the turns
that started a chat again silently, and ``check_invariants``'s problems left after a
``delete_thread`` of each chat that was not exact or whose history raised (stale entries that
expire by themselves aside), then after what ``rediskv doctor --repair`` does. Prints one
markdown table (and the kinds of problems, on stderr).
"""

from __future__ import annotations

import argparse
import asyncio
import random
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import redis
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.graph import END, START, MessagesState, StateGraph

from langgraph.checkpoint.rediskv import AsyncRedisSaver

try:
    from langgraph.checkpoint.rediskv import CheckpointLostError
except ImportError:  # (release 0.1.0 raised nothing for an eviction)

    class CheckpointLostError(Exception):  # type: ignore[no-redef]
        """Never raised."""


sys.path.insert(0, str(Path(__file__).resolve().parent))
import prose

POLICIES = ("volatile-lru", "allkeys-lru", "volatile-ttl")
TTL = {"default_ttl": 60, "refresh_on_read": True}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_server(
    directory: str, maxmemory: str, policy: str
) -> tuple[subprocess.Popen[bytes], str]:
    binary = shutil.which("redis-server")
    if binary is None:
        raise SystemExit("needs redis-server on PATH")
    port = free_port()
    args = [binary, "--port", str(port), "--bind", "127.0.0.1", "--dir", directory, "--save", ""]
    args += ["--appendonly", "no", "--maxmemory", maxmemory, "--maxmemory-policy", policy]
    process = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"redis://127.0.0.1:{port}/0"
    for _ in range(200):
        try:
            if redis.Redis.from_url(url).ping():
                return process, url
        except redis.exceptions.ConnectionError:
            time.sleep(0.05)
    process.kill()
    raise SystemExit(f"redis-server did not start on port {port}")


def build_chat(saver: AsyncRedisSaver, rng: random.Random) -> Any:
    def bot(state: MessagesState) -> dict[str, Any]:
        answer = prose.text(rng, rng.randint(200, 1200))
        return {"messages": [AIMessage(answer, id=f"ai-{len(state['messages'])}")]}

    builder = StateGraph(MessagesState)
    builder.add_node("bot", bot)
    builder.add_edge(START, "bot")
    builder.add_edge("bot", END)
    return builder.compile(checkpointer=saver)


def cfg(thread: str) -> Any:
    return {"configurable": {"thread_id": thread}}


async def run_policy(
    policy: str, chats: int, turns: int, at_once: int, maxmemory: str, explain: bool = False
) -> dict:
    rng = random.Random(31)
    with tempfile.TemporaryDirectory() as directory:
        process, url = start_server(directory, maxmemory, policy)
        try:
            async with AsyncRedisSaver(url=url, prefix="ev", ttl=TTL) as saver:
                graph = build_chat(saver, rng)
                written: dict[str, list[str]] = {}
                counts = {"failed turns": 0, "restarted": 0}

                async def chat(thread: str) -> None:
                    for turn in range(turns):
                        message = HumanMessage(prose.text(rng, 200), id=f"human-{turn}")
                        try:
                            state = await graph.ainvoke({"messages": [message]}, cfg(thread))
                        except CheckpointLostError:
                            counts["failed turns"] += 1
                            continue
                        got = [m.content for m in state["messages"]]
                        if len(got) < len(written.get(thread, [])) + 2:
                            counts["restarted"] += 1
                        written[thread] = got

                threads = [f"chat-{n}" for n in range(chats)]
                for start in range(0, chats, at_once):
                    await asyncio.gather(*(chat(t) for t in threads[start : start + at_once]))
                client = redis.Redis.from_url(url)
                counts["evicted keys"] = int(client.info("stats")["evicted_keys"])
                client.config_set("maxmemory", "0")  # what follows reads and cleans
                outcome: dict[str, str] = {}
                for thread, messages in written.items():
                    try:
                        state = await graph.aget_state(cfg(thread))
                    except CheckpointLostError:
                        outcome[thread] = "error"
                        continue
                    got = [m.content for m in state.values.get("messages", [])]
                    if not state.values:
                        outcome[thread] = "empty"
                    elif got == messages:
                        outcome[thread] = "exact"
                    elif got == messages[: len(got)]:
                        outcome[thread] = "older"
                    else:
                        outcome[thread] = "wrong"
                for kind in ("exact", "error", "empty", "older", "wrong"):
                    counts[kind] = list(outcome.values()).count(kind)
                if explain:
                    for thread, kind in outcome.items():
                        if kind in ("empty", "older", "wrong"):
                            describe(client, thread, kind, written[thread])
                # the history of the exact ones (get_state_history): an older checkpoint
                # that lost a value raises too
                counts["history error"] = 0
                for thread, kind in outcome.items():
                    if kind == "exact":
                        try:
                            _ = [s async for s in graph.aget_state_history(cfg(thread))]
                            continue
                        except CheckpointLostError:
                            counts["history error"] += 1
                    await saver.adelete_thread(thread)  # (what the app does with a lost chat)
                problems = [p for p in await saver.acheck_invariants() if not p.stale]
                counts["problems"] = len(problems)
                kinds = sorted({p.problem for p in problems})
                print(f"{policy}: problems {kinds}", file=sys.stderr)
                counts["after repair"] = await repaired(saver, client, problems)
                return counts
        finally:
            process.kill()
            process.wait()


def describe(client: redis.Redis, thread: str, kind: str, messages: list[str]) -> None:
    """What is left of a chat that read silently wrong (--explain), on stderr."""
    keys = sorted(k.decode() for k in client.scan_iter(match=f"ev:*{{{thread}}}*"))
    print(f"{thread}: {kind}, {len(messages)} messages written; keys left:", file=sys.stderr)
    for key in keys:
        kind_of = client.type(key).decode()
        detail = ""
        if ":dl:" in key or ":idx:" in key:
            detail = str(client.hgetall(key) if kind_of == "hash" else client.zrange(key, 0, -1))[
                :600
            ]
        print(f"  {key} {kind_of} pttl={client.pttl(key)} {detail}", file=sys.stderr)
    alive = client.zscore("ev:alive", f"{{{thread}}}")
    print(f"  registry: {alive} (now {client.time()[0]})", file=sys.stderr)


async def repaired(saver: AsyncRedisSaver, client: redis.Redis, problems: list[Any]) -> Any:
    """The problems left after what `rediskv doctor --repair` does (this release's): the keys
    no index leads to that never expire go, the index entries an eviction took are written
    again. "-" for a release without it."""
    try:
        from langgraph.checkpoint.rediskv.core.check import LOST_INDEX_ENTRIES
        from langgraph.checkpoint.rediskv.eviction import remove_orphans
    except ImportError:
        return "-"
    remove_orphans(client, problems)
    if any(p.problem in LOST_INDEX_ENTRIES for p in problems):
        await saver.areindex_metadata()
    return len([p for p in await saver.acheck_invariants() if not p.stale])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--policies", default=",".join(POLICIES))
    parser.add_argument("--chats", type=int, default=400)
    parser.add_argument("--turns", type=int, default=15)
    parser.add_argument("--at-once", type=int, default=20)
    parser.add_argument("--maxmemory", default="30mb")
    parser.add_argument("--explain", action="store_true", help="what is left of a silent chat")
    args = parser.parse_args(argv)
    import langgraph.checkpoint.rediskv as package

    print(f"saver: {Path(package.__file__).parent} ({getattr(package, '__version__', '?')})")
    columns = ["exact", "error", "empty", "older", "wrong", "history error", "restarted"]
    columns += ["failed turns"]
    columns += ["evicted keys", "problems", "after repair"]
    print("| policy | " + " | ".join(columns) + " |")
    print("|---|" + "--:|" * len(columns))
    for policy in args.policies.split(","):
        counts = asyncio.run(
            run_policy(policy, args.chats, args.turns, args.at_once, args.maxmemory, args.explain)
        )
        print(f"| `{policy}` | " + " | ".join(str(counts[c]) for c in columns) + " |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
