"""Global queries at scale: list(None, filter=..., limit=10) over a store of many threads, this
saver with its default settings (no key declared in index_metadata), with the key declared, and
the PostgreSQL saver, on the same threads.

    python benchmarks/global_queries.py                   # 10,000 threads
    python benchmarks/global_queries.py --threads 100000  # about 10 minutes, most of it Postgres
    python benchmarks/global_queries.py --quick           # 1,000 threads

Each thread has 3 checkpoints (source input, loop, loop) with the metadata a chat backend
writes: `user_id` (10 threads per user), `tenant` (50 tenants), `run_id` (one per thread).
The ids are made before the run, so they fall within a second (a cluster's worst case, see
make_ids); the threads of one tenant get ids spread over 30 minutes instead, as threads
written over time have, and that tenant has a row of its own.
Redis: a private redis-server started for the run (persistence off), written with the async
saver, 64 calls in flight; with `--cluster`, also the test suite's 3-node cluster (its
LocalCluster, persistence turned off), written the same way, and `delete_for_runs` of one run
timed on each saver (the threads-by-value lists on a cluster, see core/cluster_lists.py);
PostgreSQL: `AsyncPostgresSaver` in a new database (`--postgres-url`, as bench.py), dropped at
the end. Each
query runs `--iters` times, the savers interleaved in a rotating order, and the cell is the p50
in milliseconds; every saver's answer is checked against the others' (the same checkpoint ids,
in the same order).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import secrets
import statistics
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import cost  # benchmarks/cost.py: the private server
import redis
from bench import table
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver, empty_checkpoint

from langgraph.checkpoint.rediskv import AsyncRedisSaver

IN_FLIGHT = 64
USERS_PER_THREAD = 10  # threads per user_id
TENANTS = 50
SPREAD_TENANT = 8  # the tenant whose threads' ids are spread over time
SPREAD_SECONDS = 1800


def metadata_of(n: int, step: int) -> dict[str, Any]:
    return {
        "source": "input" if step == 0 else "loop",
        "step": step - 1,
        "user_id": f"user-{n // USERS_PER_THREAD:06d}",
        "tenant": f"tenant-{n % TENANTS:02d}",
        "run_id": f"run-{n:07d}",
    }


def uuid6_at(seconds: float) -> str:
    """A UUIDv6 of the given Unix time, as LangGraph makes checkpoint ids."""
    ts = int(seconds * 10_000_000) + 0x01B21DD213814000  # 100 ns steps since 1582-10-15
    value = (ts >> 12) << 80 | 6 << 76 | (ts & 0xFFF) << 64 | 0b10 << 62 | secrets.randbits(62)
    return str(uuid.UUID(int=value))


def make_ids(threads: int) -> list[list[str]]:
    """The checkpoint ids of every thread, made once so that every saver stores the same. Made
    now, so all of them fall within a second: the worst case of a cluster's lists, whose
    scores are loose by 10 s (every thread of a value is asked its newest score). The threads
    of tenant SPREAD_TENANT instead look written over SPREAD_SECONDS, as in real use: thread n
    at n / threads of that time, its checkpoints 2 s apart."""
    start = time.time() - SPREAD_SECONDS - 10
    return [
        [uuid6_at(start + SPREAD_SECONDS * n / threads + 2 * step) for step in range(3)]
        if n % TENANTS == SPREAD_TENANT
        else [empty_checkpoint()["id"] for _ in range(3)]
        for n in range(threads)
    ]


async def write_threads(saver: BaseCheckpointSaver[Any], ids: list[list[str]]) -> None:
    sem = asyncio.Semaphore(IN_FLIGHT)

    async def one(n: int) -> None:
        async with sem:
            config: RunnableConfig = {"configurable": {"thread_id": f"thread-{n:07d}",
                                                       "checkpoint_ns": ""}}
            for step in range(3):
                ck = empty_checkpoint()
                ck["id"] = ids[n][step]
                ck["channel_values"] = {"messages": f"message {step} of thread {n}"}
                ck["channel_versions"] = {"messages": step + 1}
                config = await saver.aput(config, ck, metadata_of(n, step),  # type: ignore[arg-type]
                                          {"messages": step + 1})

    await asyncio.gather(*(one(n) for n in range(len(ids))))


async def listed(saver: BaseCheckpointSaver[Any], flt: dict[str, Any]) -> list[str]:
    return [t.checkpoint["id"] async for t in saver.alist(None, filter=flt, limit=10)]


def start_cluster() -> Any:
    """The test suite's 3-node cluster on loopback, without its persistence."""
    import tempfile

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from tests.conftest import LocalCluster

    cluster = LocalCluster(Path(tempfile.mkdtemp(prefix="gq-cluster-"))).start()
    for node in cluster.nodes:
        with redis.Redis(port=node.port) as admin:
            admin.config_set("appendonly", "no")
            admin.config_set("save", "")
    return cluster


async def time_delete_for_runs(
    savers: dict[str, BaseCheckpointSaver[Any]], threads: int, iters: int
) -> dict[str, float]:
    """p50 of delete_for_runs([one run]) per saver: a different thread's run each round, the
    same on every saver, the savers interleaved."""
    times: dict[str, list[float]] = {}
    names = list(savers)
    for it in range(iters):
        run = f"run-{(it * 7919) % threads:07d}"
        for name in names[it % len(names):] + names[: it % len(names)]:
            t = time.perf_counter()
            try:
                await savers[name].adelete_for_runs([run])
            except NotImplementedError:
                continue
            times.setdefault(name, []).append(time.perf_counter() - t)
    return {name: statistics.median(ts) * 1e3 for name, ts in times.items()}


async def main_async(args: argparse.Namespace) -> int:
    threads = 1_000 if args.quick else args.threads
    server = cost.PrivateRedis(args.redis_server)
    savers: dict[str, BaseCheckpointSaver[Any]] = {}
    pg_store: cost.Store | None = None
    cluster = None
    try:
        ids = make_ids(threads)
        t0 = time.perf_counter()
        default = AsyncRedisSaver(server.url, prefix="gq")
        await write_threads(default, ids)
        cost.log(f"rediskv: {threads:,} threads in {time.perf_counter() - t0:.1f}s")
        savers["rediskv (default)"] = default
        # the same store, user_id declared: its index built by reindex, as a user would
        declared = AsyncRedisSaver(server.url, prefix="gq", index_metadata=("run_id", "user_id"))
        t0 = time.perf_counter()
        await declared.areindex_metadata()
        cost.log(f"rediskv: user_id indexed in {time.perf_counter() - t0:.1f}s")
        savers["rediskv, user_id declared"] = declared
        if args.cluster:
            cluster = start_cluster()
            on_cluster = AsyncRedisSaver(cluster.url, cluster=True, prefix="gq")
            t0 = time.perf_counter()
            await write_threads(on_cluster, ids)
            cost.log(f"rediskv cluster: {threads:,} threads in {time.perf_counter() - t0:.1f}s")
            savers["rediskv, 3-node cluster"] = on_cluster
        try:
            pg_store = await cost.make_postgres(args, secrets.token_hex(4))
            pg = await pg_store.open()
            t0 = time.perf_counter()
            await write_threads(pg, ids)
            cost.log(f"postgres: {threads:,} threads in {time.perf_counter() - t0:.1f}s")
            savers["postgres"] = pg
        except cost.Unavailable as exc:
            cost.log(f"postgres: {exc}")

        r = redis.Redis.from_url(server.url)
        by_kind = server.by_kind(lambda key: key.split(":")[1])
        r.close()
        checkpoints = threads * 3

        queries = {
            "user_id (10 threads)": {"user_id": f"user-{threads // 20:06d}"},
            f"tenant ({threads // TENANTS:,} threads)": {"tenant": "tenant-07"},
            f"tenant, ids over {SPREAD_SECONDS // 60} min ({threads // TENANTS:,} threads)": {
                "tenant": f"tenant-{SPREAD_TENANT:02d}"
            },
            "user_id + tenant": {"user_id": f"user-{threads // 20:06d}",
                                 "tenant": f"tenant-{(threads // 2) % TENANTS:02d}"},
            "user_id, no match": {"user_id": "nobody"},
        }
        times: dict[tuple[str, str], list[float]] = {}
        names = list(savers)
        for it in range(args.iters):
            order = names[it % len(names):] + names[: it % len(names)]
            for q, flt in queries.items():
                answers = {}
                for name in order:
                    t = time.perf_counter()
                    answers[name] = await listed(savers[name], flt)
                    times.setdefault((q, name), []).append(time.perf_counter() - t)
                first = answers[names[0]]
                for name, got in answers.items():
                    if got != first:
                        raise RuntimeError(f"{name} answered {q} differently: {got} != {first}")
        rows = []
        for q in queries:
            cells = [q]
            pg = times.get((q, "postgres"))
            pg_ms = statistics.median(pg) * 1e3 if pg else None
            for name in names:
                ms = statistics.median(times[(q, name)]) * 1e3
                ratio = f" ({ms / pg_ms:.2f}x)" if pg_ms and name != "postgres" else ""
                cells.append(f"{ms:,.2f}{ratio}")
            rows.append(cells)
        print(f"# Global queries: list(None, filter, limit=10), {threads:,} threads "
              f"({checkpoints:,} checkpoints)\n")
        print(f"p50 of {args.iters} rounds, ms (ratio to postgres)\n")
        print(table(["filter", *names], rows))
        if args.cluster:
            deletes = await time_delete_for_runs(savers, threads, args.iters)
            base = deletes["rediskv (default)"]
            print(f"\ndelete_for_runs of one run, p50 of {args.iters} rounds, ms (ratio to the "
                  "standalone default)\n")
            print(table(["saver", "ms"], [[name, f"{ms:,.2f} ({ms / base:.2f}x)"]
                                          for name, ms in deletes.items()]))
        print("\nRedis memory of the global indexes, bytes per checkpoint (MEMORY USAGE):\n")
        print(table(["key kind", "keys", "bytes / checkpoint"],
                    [[kind, f"{n:,}", f"{size / checkpoints:,.1f}"]
                     for kind, (n, size) in sorted(by_kind.items()) if kind in ("tm", "mi")]))
    finally:
        for saver in savers.values():
            if isinstance(saver, AsyncRedisSaver):
                await saver.aclose()
        if pg_store is not None:
            await pg_store.destroy()
        server.stop()
        if cluster is not None:
            cluster.stop()
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=10_000)
    parser.add_argument("--quick", action="store_true", help="1,000 threads")
    parser.add_argument("--cluster", action="store_true",
                        help="also a 3-node cluster (the test suite's), and delete_for_runs")
    parser.add_argument("--iters", type=int, default=15)
    parser.add_argument("--redis-server", default="redis-server")
    parser.add_argument("--postgres-url", default=os.environ.get(
        "BENCH_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/postgres"))
    return asyncio.run(main_async(parser.parse_args()))


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).parent))
    sys.exit(main())
