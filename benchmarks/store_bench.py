"""Store latency, RedisStore against InMemoryStore: put, get, search (with and without a
filter) and list_namespaces p50, with N items spread over 100 namespaces of 10 users.

    REDIS_URL=redis://127.0.0.1:6379/0 python benchmarks/store_bench.py --items 10000

Then semantic search (``index=``, exact cosine): ``search(query=..., limit=10)`` p50 over all
the items (10 users, 100 namespaces) and over one user's (a tenth), at each size of
``--vector-items`` (default 1000,10000; 0 skips), ``--dims`` 1536, with an embedder that
returns a seeded random vector per text (no model: the embedding's own cost is left out).
``--vector-search client,server`` measures each path (``vector_search=`` of the store; the
server's needs FT.*: a Redis Stack, Redis 8, valkey-search), with the p50 of a put (one
embedded item) and the server's memory per item (INFO used_memory before and after the load);
``--vector-only`` skips the plain section, ``--no-inmemory`` InMemoryStore's column.

The store's keys go under a fresh prefix and are deleted at the end (never FLUSHDB).
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
import uuid
import zlib
from collections.abc import Callable
from typing import Any

import numpy as np
from langgraph.store.base import BaseStore, PutOp
from langgraph.store.memory import InMemoryStore

from langgraph.store.rediskv import RedisStore
from langgraph.store.rediskv.keys import vector_index_name


def p50_ms(run: Callable[[int], Any], times: int) -> float:
    samples = []
    for i in range(times):
        start = time.perf_counter()
        run(i)
        samples.append(time.perf_counter() - start)
    return statistics.median(samples) * 1000


def namespace(i: int) -> tuple[str, ...]:
    return ("users", f"u{i % 10}", f"topic{i % 100 // 10}")


def measure(store: BaseStore, items: int, times: int) -> dict[str, float]:
    batch = 500
    for start in range(0, items, batch):
        store.batch(
            [
                PutOp(namespace(i), f"k{i}", {"n": i, "kind": "a" if i % 2 else "b"})
                for i in range(start, min(items, start + batch))
            ]
        )
    return {
        "put": p50_ms(lambda i: store.put(namespace(i), f"new{i}", {"n": i}), times),
        "get": p50_ms(lambda i: store.get(namespace(i), f"k{i}"), times),
        "search 10 (one namespace)": p50_ms(lambda i: store.search(namespace(i), limit=10), times),
        "search 10 (a user: 10 namespaces)": p50_ms(
            lambda i: store.search(("users", f"u{i % 10}"), limit=10), times
        ),
        "search 10, filter kind=a": p50_ms(
            lambda i: store.search(namespace(i), filter={"kind": "a"}, limit=10), times
        ),
        "list_namespaces (users)": p50_ms(
            lambda i: store.list_namespaces(prefix=("users",), limit=100), times
        ),
    }


def fake_embed(dims: int) -> Callable[[list[str]], list[list[float]]]:
    def embed(texts: list[str]) -> list[list[float]]:
        return [
            np.random.default_rng(zlib.crc32(t.encode())).standard_normal(dims).tolist()
            for t in texts
        ]

    return embed


def measure_vectors(store: BaseStore, items: int, times: int) -> dict[str, float]:
    batch = 500
    client = store.client if isinstance(store, RedisStore) else None
    used = int(client.info("memory")["used_memory"]) if client is not None else 0
    for start in range(0, items, batch):
        store.batch(
            [
                PutOp(namespace(i), f"k{i}", {"text": f"memory {i}", "n": i})
                for i in range(start, min(items, start + batch))
            ]
        )
    memory: dict[str, float] = {}
    if client is not None:
        time.sleep(1)  # (the index's background work)
        memory["bytes per item (INFO used_memory)"] = (
            int(client.info("memory")["used_memory"]) - used
        ) / items
    return {
        **memory,
        "put (one embedded item)": p50_ms(
            lambda i: store.put(namespace(i), f"new{i}", {"text": f"new memory {i}"}), times
        ),
        "query, all items, limit 10": p50_ms(
            lambda i: store.search(("users",), query=f"question {i}", limit=10), times
        ),
        "query, one user (a tenth), limit 10": p50_ms(
            lambda i: store.search(("users", f"u{i % 10}"), query=f"question {i}", limit=10),
            times,
        ),
    }


def unlink_prefix(store: RedisStore, prefix: str) -> None:
    if store.config.server_search:
        store.client.execute_command("FT.DROPINDEX", vector_index_name(prefix))  # type: ignore[no-untyped-call]
    keys = list(store.client.scan_iter(match=f"{prefix}:*", count=1000))
    for start in range(0, len(keys), 500):
        store.client.unlink(*keys[start : start + 500])


def vector_rows(
    url: str, sizes: list[int], dims: int, times: int, paths: list[str], inmemory: bool
) -> None:
    print(f"\nsemantic search p50 ms, dims {dims}, {times} calls each")
    names = [f"RedisStore {path}" for path in paths]
    print(f"{'items':>7} {'operation':38} {'InMemoryStore':>14}", *(f"{n:>18}" for n in names))
    for items in sizes:
        index: Any = {"dims": dims, "embed": fake_embed(dims), "fields": ["text"]}
        model = measure_vectors(InMemoryStore(index=index), items, times) if inmemory else {}
        ours = []
        for path in paths:
            prefix = f"bench{uuid.uuid4().hex[:8]}"
            with RedisStore.from_conn_string(
                url,
                prefix=prefix,
                index=index,
                vector_search=path,
            ) as store:
                try:
                    ours.append(measure_vectors(store, items, times))
                finally:
                    unlink_prefix(store, prefix)
        for name in ours[0]:
            print(
                f"{items:7} {name:38} {model.get(name, float('nan')):14.1f}",
                *(f"{row[name]:18.1f}" for row in ours),
                flush=True,
            )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--items", type=int, default=10_000)
    parser.add_argument("--times", type=int, default=300)
    parser.add_argument("--vector-items", default="1000,10000")
    parser.add_argument("--vector-times", type=int, default=20)
    parser.add_argument("--dims", type=int, default=1536)
    parser.add_argument("--vector-search", default="auto", help="paths: auto,client,server")
    parser.add_argument("--vector-only", action="store_true")
    parser.add_argument("--no-inmemory", action="store_true")
    args = parser.parse_args()
    url = os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0")
    sizes = [int(n) for n in args.vector_items.split(",") if int(n) > 0]
    paths = args.vector_search.split(",")
    if args.vector_only:
        vector_rows(url, sizes, args.dims, args.vector_times, paths, not args.no_inmemory)
        return
    prefix = f"bench{uuid.uuid4().hex[:8]}"
    results = {"InMemoryStore": measure(InMemoryStore(), args.items, args.times)}
    with RedisStore.from_conn_string(url, prefix=prefix) as store:
        try:
            results["RedisStore"] = measure(store, args.items, args.times)
        finally:
            unlink_prefix(store, prefix)
    print(f"p50 ms, {args.items} items in 100 namespaces, {args.times} calls each")
    print(f"{'operation':36} {'InMemoryStore':>14} {'RedisStore':>11}")
    for name in results["RedisStore"]:
        print(
            f"{name:36} {results['InMemoryStore'][name]:14.3f} {results['RedisStore'][name]:11.3f}"
        )
    if sizes:
        vector_rows(url, sizes, args.dims, args.vector_times, paths, not args.no_inmemory)


if __name__ == "__main__":
    main()
