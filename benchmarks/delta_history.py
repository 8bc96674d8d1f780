"""Plain ``add_messages`` vs ``DeltaChannel`` on a long chat, against a real Redis or Valkey.

    python benchmarks/delta_history.py [--url redis://localhost:6379/0] [--turns 500]

One thread per variant, ``--turns`` turns of a chat (a human message in, one AI reply out).
With ``add_messages`` every checkpoint stores the whole message list; with a ``DeltaChannel``
only every ``snapshot_frequency``-th update does, and reading rebuilds the rest from ancestor
writes with ``get_delta_channel_history``. Printed as a markdown table:

* bytes of Redis memory per checkpoint: ``MEMORY USAGE`` of every key under the run's prefix
  (found with SCAN), divided by the number of checkpoints;
* p50 latency and round trips of ``graph.get_state`` (loads and rebuilds the state) at the
  last turn's checkpoint and at its parent: with the default ``snapshot_frequency`` of 100 and
  two updates per turn, turn 500's last checkpoint holds a snapshot, and its parent needs the
  longest replay (99 writes);
* round trips of one ``get_delta_channel_history`` call at the last turn (counted at the
  connection: one per command or pipeline sent), and the writes it returns.

Everything is written under a fresh prefix, whose keys are unlinked at the end; the script
never flushes the server.
"""

from __future__ import annotations

import argparse
import functools
import statistics
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Annotated, Any, TypedDict, cast

import redis
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage
from langgraph.channels.delta import DeltaChannel
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import _messages_delta_reducer, add_messages

from langgraph.checkpoint.rediskv import RedisSaver

FILLER = "lorem ipsum dolor sit amet " * 4  # ~110 characters of message text


def build_graph(saver: RedisSaver, delta: bool, snapshot_frequency: int) -> Any:
    reducer: Any
    if delta:
        reducer = DeltaChannel(
            cast(Any, _messages_delta_reducer), snapshot_frequency=snapshot_frequency
        )
    else:
        reducer = add_messages
    State = TypedDict("State", {"messages": Annotated[list[AnyMessage], reducer]})  # noqa: UP013

    def bot(state: Any) -> dict[str, Any]:
        last = state["messages"][-1]
        return {"messages": [AIMessage(content=f"re {last.content}", id=f"ai-{last.id}")]}

    builder: Any = StateGraph(State)
    builder.add_node("bot", bot)
    builder.add_edge(START, "bot")
    builder.add_edge("bot", END)
    return builder.compile(checkpointer=saver)


@contextmanager
def count_round_trips() -> Iterator[list[int]]:
    cls: Any = redis.connection.AbstractConnection
    original = cls.send_packed_command
    count = [0]

    def counted(conn: Any, *args: Any, **kwargs: Any) -> Any:
        count[0] += 1
        return original(conn, *args, **kwargs)

    cls.send_packed_command = counted
    try:
        yield count
    finally:
        cls.send_packed_command = original


def scan_keys(client: redis.Redis, prefix: str) -> list[bytes]:
    return list(client.scan_iter(match=f"{prefix}:*", count=1000))


def memory_bytes(client: redis.Redis, keys: list[bytes]) -> int:
    total = 0
    for start in range(0, len(keys), 500):
        pipe = client.pipeline(transaction=False)
        for key in keys[start : start + 500]:
            pipe.memory_usage(key, samples=0)
        total += sum(n or 0 for n in pipe.execute())
    return total


def p50_ms(call: Callable[[], Any], repeat: int) -> float:
    call()  # warm
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        call()
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


def run_variant(
    url: str, client: redis.Redis, delta: bool, turns: int, snapshot_frequency: int, repeat: int
) -> dict[str, Any]:
    prefix = f"bench-delta-{uuid.uuid4().hex[:8]}"
    try:
        with RedisSaver(url, prefix=prefix) as saver:
            graph = build_graph(saver, delta, snapshot_frequency)
            config: Any = {"configurable": {"thread_id": "chat"}}
            start = time.perf_counter()
            for turn in range(turns):
                text = f"message {turn} {FILLER}"
                graph.invoke({"messages": [HumanMessage(content=text, id=f"h{turn}")]}, config)
            write_s = time.perf_counter() - start

            state = graph.get_state(config)
            assert len(state.values["messages"]) == 2 * turns
            checkpoints = sum(1 for _ in saver.list(config))
            keys = scan_keys(client, prefix)
            memory = memory_bytes(client, keys)

            # at the last checkpoint, and at its parent (mid-turn): with a DeltaChannel the
            # one may hold a snapshot and the other need the longest replay
            parent = saver.get_tuple(config)
            assert parent is not None and parent.parent_config is not None
            targets = {"last": config, "parent": parent.parent_config}
            latency, trips = {}, {}
            saver.get_delta_channel_history(config=config, channels=["messages"])  # load script
            for name, target in targets.items():
                latency[name] = p50_ms(functools.partial(graph.get_state, target), repeat)
                with count_round_trips() as count:
                    graph.get_state(target)
                trips[name] = count[0]
            with count_round_trips() as history_trips:
                history = saver.get_delta_channel_history(config=config, channels=["messages"])
            replayed = len(history["messages"]["writes"])
            return {
                "variant": f"DeltaChannel (snapshot_frequency={snapshot_frequency})"
                if delta
                else "add_messages (plain)",
                "checkpoints": checkpoints,
                "keys": len(keys),
                "bytes_per_checkpoint": memory / checkpoints,
                "total_mb": memory / 1e6,
                "get_state_p50_ms": latency,
                "get_state_round_trips": trips,
                "history_round_trips": history_trips[0],
                "replayed_writes": replayed,
                "write_s": write_s,
            }
    finally:
        keys = scan_keys(client, prefix)
        for start in range(0, len(keys), 1000):
            client.unlink(*keys[start : start + 1000])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", default="redis://localhost:6379/0")
    parser.add_argument("--turns", type=int, default=500)
    parser.add_argument("--snapshot-frequency", type=int, default=100)
    parser.add_argument("--repeat", type=int, default=30, help="get_state samples for the p50")
    args = parser.parse_args()

    client = redis.Redis.from_url(args.url)
    rows = [
        run_variant(args.url, client, delta, args.turns, args.snapshot_frequency, args.repeat)
        for delta in (False, True)
    ]
    client.close()

    print(
        f"{args.turns}-turn chat, {rows[0]['checkpoints']} checkpoints per thread; get_state at "
        "the last checkpoint / at its parent\n"
    )
    print(
        "| channel | bytes / checkpoint | total MB | get_state p50 (ms) "
        "| get_state round trips | history round trips | writes replayed | write time (s) |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        p50, trips = r["get_state_p50_ms"], r["get_state_round_trips"]
        print(
            f"| {r['variant']} | {r['bytes_per_checkpoint']:,.0f} | {r['total_mb']:.1f} "
            f"| {p50['last']:.2f} / {p50['parent']:.2f} | {trips['last']} / {trips['parent']} "
            f"| {r['history_round_trips']} | {r['replayed_writes']} | {r['write_s']:.1f} |"
        )


if __name__ == "__main__":
    main()
