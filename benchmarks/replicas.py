#!/usr/bin/env python
"""The cost of ``wait_for_replicas`` per put: a chat thread's puts (20 messages, bench.py's
chat checkpoint) with the option off and on, interleaved, against a primary that has a
replica. Prints p50 and p99 in microseconds.

    redis-server --port 6390 --save '' &
    redis-server --port 6391 --save '' --replicaof 127.0.0.1 6390 &
    python benchmarks/replicas.py --url redis://127.0.0.1:6390/0 --puts 500
"""

from __future__ import annotations

import argparse
import random
import secrets
import time

import redis
from bench import ThreadBuilder, chat_values, delete_prefix, percentile

from langgraph.checkpoint.rediskv import RedisSaver


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", default="redis://127.0.0.1:6390/0", help="the primary")
    parser.add_argument("--puts", type=int, default=500, help="puts each way")
    parser.add_argument("--replicas", type=int, default=1, help="wait_for_replicas when on")
    args = parser.parse_args()
    with redis.Redis.from_url(args.url) as admin:
        replicas = admin.info("replication")["connected_slaves"]
    if replicas < args.replicas:
        raise SystemExit(f"{args.url} has {replicas} replicas connected, {args.replicas} asked")
    prefix = f"bench-wait-{secrets.token_hex(4)}"
    savers = {
        "off": RedisSaver(args.url, prefix=prefix + "-off"),
        "on": RedisSaver(
            args.url, prefix=prefix + "-on", wait_for_replicas=args.replicas, wait_timeout=1
        ),
    }
    rng = random.Random(7)
    threads = {name: ThreadBuilder(f"chat-{name}", chat_values(rng, "u1"), "u1") for name in savers}
    samples: dict[str, list[float]] = {name: [] for name in savers}
    try:
        for name, saver in savers.items():  # (warm up: scripts loaded, first checkpoint)
            put = threads[name].next()
            saver.put(put.config, put.checkpoint, put.metadata, put.new_versions)
        for i in range(args.puts):
            for name in sorted(savers, reverse=i % 2 == 1):  # (alternating order)
                put = threads[name].next()
                started = time.perf_counter()
                savers[name].put(put.config, put.checkpoint, put.metadata, put.new_versions)
                samples[name].append((time.perf_counter() - started) * 1e6)
    finally:
        with redis.Redis.from_url(args.url) as admin:
            for name, saver in savers.items():
                saver.close()
                delete_prefix(admin, f"{prefix}-{name}")
    for name in savers:
        p50, p99 = percentile(samples[name], 50), percentile(samples[name], 99)
        print(f"wait_for_replicas {name:>3}: p50 {p50:7.0f} us   p99 {p99:7.0f} us")


if __name__ == "__main__":
    main()
