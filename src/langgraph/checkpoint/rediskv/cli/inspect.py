"""The prefix and the server as a whole: ``stats`` (keys, threads, memory) and ``doctor``
(server settings and the consistency of the store)."""

from __future__ import annotations

import argparse
import hashlib
from collections import Counter
from collections.abc import Callable
from typing import Any

import redis

from ..core.check import LOST_INDEX_ENTRIES, Problem
from ..eviction import FIX, eviction_risk, remove_orphans
from ..functions import versions_on_server
from ..keys import KeySchema
from ..scripts import FUNCTION_OPS, function_library, script_sources
from .common import CliError, index_states, open_saver, refused
from .output import emit_json, escape, human_bytes, make_console, print_fields
from .store import SCAN_COUNT, memory_usage

TOP_THREADS = 10
MIN_VERSION = (7, 0)  # the scripts carry Redis 7 script flags
# keys whose expiry doctor reads to tell whether a saver of the prefix uses a ttl
EXPIRY_SAMPLE = 1000
# doctor's exit codes: a check failed; no check failed, but one could not run
FAILED, UNKNOWN = 2, 3


def tag_of(key: str) -> str | None:
    """The hash tag ``{T}`` of a key of the schema, or None."""
    start = key.find("{")
    end = key.find("}", start)
    return key[start : end + 1] if start >= 0 and end > start else None


def kind_of(prefix: str, key: str) -> str:
    """The kind of a key under ``prefix`` (``cp``, ``blob``, ``idx`` ...)."""
    return key[len(prefix) + 1 :].split(":", 1)[0]


# -- stats -----------------------------------------------------------------------------------------


def cmd_stats(args: argparse.Namespace) -> int:
    with open_saver(args) as saver:
        schema = KeySchema(saver.prefix)
        # one SCAN pass over the keyspace; every key under the prefix is counted
        keys = list(saver.client.scan_iter(match=schema.all_keys_pattern(), count=SCAN_COUNT))
        memory = memory_usage(saver.client, keys)
        sizes = memory.sizes if memory.sizes is not None else [0] * len(keys)
        by_kind: Counter[str] = Counter()
        thread_keys: Counter[str] = Counter()
        thread_bytes: Counter[str] = Counter()
        threads = 0
        for raw, size in zip(keys, sizes, strict=True):
            key = raw.decode()
            kind = kind_of(saver.prefix, key)
            by_kind[kind] += 1
            threads += kind == "th"
            tag = tag_of(key)
            if tag is not None:
                thread_id = schema.thread_from_tag(tag)
                thread_keys[thread_id] += 1
                thread_bytes[thread_id] += size
        known = memory.sizes is not None
        if known:  # largest first
            top = sorted(thread_keys, key=lambda t: (-thread_bytes[t], t))[:TOP_THREADS]
        else:  # most keys first
            top = sorted(thread_keys, key=lambda t: (-thread_keys[t], t))[:TOP_THREADS]
        data: dict[str, Any] = {
            "prefix": saver.prefix,
            "keys": len(keys),
            "threads": threads,
            "memory_bytes": memory.total,
            "memory_note": memory.note,
            "keys_by_kind": dict(sorted(by_kind.items())),
            "top_threads": [
                {
                    "thread_id": t,
                    "keys": thread_keys[t],
                    "size_bytes": thread_bytes[t] if known else None,
                }
                for t in top
            ],
        }
    if args.json:
        return emit_json(data)
    from rich.table import Table

    console = make_console()
    total = data["memory_bytes"]
    print_fields(
        console,
        [
            ("prefix", data["prefix"]),
            ("keys", str(data["keys"])),
            ("threads", str(data["threads"])),
            (
                "memory",
                (f"{human_bytes(total)} ({total} bytes, " if known else "? (")
                + f"{data['memory_note']})",
            ),
            (
                "keys by kind",
                ", ".join(f"{kind} {n}" for kind, n in data["keys_by_kind"].items()) or "-",
            ),
        ],
        markup="bold",
    )
    if top:
        table = Table(title=f"Largest threads (top {TOP_THREADS})")
        table.add_column("thread")
        table.add_column("keys", justify="right")
        table.add_column("size", justify="right")
        table.add_column("bytes", justify="right")
        for row in data["top_threads"]:
            size = row["size_bytes"]
            table.add_row(
                escape(row["thread_id"]),
                str(row["keys"]),
                human_bytes(size),
                "?" if size is None else str(size),
            )
        console.print(table)
    return 0


# -- doctor ----------------------------------------------------------------------------------------

Check = dict[str, str]


def _version_tuple(version: str) -> tuple[int, ...]:
    parts = []
    for part in version.split("."):
        digits = "".join(c for c in part if c.isdigit())
        if not digits:
            break
        parts.append(int(digits))
    return tuple(parts)


def _check(name: str, status: str, detail: str) -> Check:
    return {"check": name, "status": status, "detail": detail}


def _from_info(
    client: redis.Redis, section: str, name: str, judge: Callable[[dict[str, Any]], Check]
) -> Check:
    """A check on an INFO section: "unknown", with the reason, when INFO is refused."""
    try:
        info = client.info(section)
    except redis.exceptions.ResponseError as exc:
        return _check(name, "unknown", refused("INFO", exc))
    return judge(info)


def _server(info: dict[str, Any]) -> Check:
    compat = str(info.get("redis_version", "?"))
    if "valkey_version" in info:
        name = f"Valkey {info['valkey_version']} (redis_version {compat})"
    else:
        name = f"Redis {compat}"
    if _version_tuple(compat) >= MIN_VERSION:
        return _check("server", "ok", f"{name}: 7.0 or later")
    return _check(
        "server", "fail", f"{name}: the saver needs Redis 7.0 or later (or Valkey 7.2 or later)"
    )


def _keys_expire(client: redis.Redis, schema: KeySchema) -> bool:
    """Whether keys of the prefix carry an expiry: a thread given its own (P:ttl:), or a
    saver's ttl (seen on the first EXPIRY_SAMPLE keys: such a saver gives every key one)."""
    sample: list[bytes] = []
    for key in client.scan_iter(match=schema.all_keys_pattern(), count=SCAN_COUNT):
        if kind_of(schema.prefix, key.decode()) == "ttl":
            return True
        if len(sample) < EXPIRY_SAMPLE:
            sample.append(key)
    pipe = client.pipeline(transaction=False)
    for key in sample:
        pipe.pttl(key)
    return any(left >= 0 for left in pipe.execute())


def _memory_check(client: redis.Redis, schema: KeySchema) -> Check:
    """The maxmemory-policy: fails when the server can evict the saver's keys (eviction.py),
    which loses checkpoints (their reads then fail with CheckpointLostError)."""
    try:
        info = client.info("memory")
    except redis.exceptions.ResponseError as exc:
        return _check("maxmemory-policy", "unknown", refused("INFO", exc))
    try:
        keys_expire = _keys_expire(client, schema)
    except redis.exceptions.ResponseError as exc:
        return _check("maxmemory-policy", "unknown", refused("SCAN or PTTL", exc))
    policy = str(info.get("maxmemory_policy", "unknown"))
    limit = int(info.get("maxmemory", 0) or 0)
    limit_text = f"maxmemory {human_bytes(limit)}" if limit else "no maxmemory limit"
    risk = eviction_risk(policy, keys_expire)
    if risk is None:
        return _check("maxmemory-policy", "ok", f"{policy} ({limit_text})")
    text = f"{policy} ({limit_text}): {risk}, and a thread that loses one cannot be read; {FIX}"
    # (without a limit nothing is evicted, until one is set)
    return _check("maxmemory-policy", "fail" if limit else "warn", text)


def _persistence_check(client: redis.Redis) -> Check:
    try:
        aof = bool(int(client.info("persistence").get("aof_enabled", 0)))
    except redis.exceptions.ResponseError as exc:
        return _check("persistence", "unknown", refused("INFO", exc))
    save: str | None
    try:
        save = str(client.config_get("save").get("save", ""))
        rdb = f"save {save!r}" if save else "off"
    except redis.exceptions.ResponseError as exc:  # CONFIG refused (managed services, ACLs)
        save = None
        rdb = f"unknown ({refused('CONFIG GET', exc).split(' (', 1)[0]})"
    detail = f"aof {'on' if aof else 'off'}, rdb {rdb}"
    if aof or save:
        return _check("persistence", "ok", detail)
    if save is None:  # without AOF, only the RDB setting says whether anything is saved
        return _check("persistence", "unknown", detail + ": the server may keep no copy on disk")
    return _check("persistence", "warn", detail + ": checkpoints are lost when the server restarts")


def _scripts_check(client: redis.Redis, library: str | None) -> Check:
    """The scripts loaded in the server's script cache. ``library``: this version's function
    library when the server holds it with this version's code; the operations it holds then
    run as its functions, and their scripts are loaded only if functions are turned off."""
    sources = script_sources()
    shas = {name: hashlib.sha1(source.encode()).hexdigest() for name, source in sources.items()}
    try:
        loaded = client.script_exists(*shas.values())
    except redis.exceptions.ResponseError as exc:
        return _check("scripts", "unknown", refused("SCRIPT EXISTS", exc))
    as_functions = [
        name
        for name, ok in zip(shas, loaded, strict=True)
        if not ok and library and name in FUNCTION_OPS
    ]
    missing = [
        name for name, ok in zip(shas, loaded, strict=True) if not ok and name not in as_functions
    ]
    count = f"{len(shas) - len(missing) - len(as_functions)} of {len(shas)} loaded"
    functions = f"; {len(as_functions)} more run as functions of {library}" if as_functions else ""
    if not missing:
        return _check("scripts", "ok", f"{count}{functions}")
    return _check("scripts", "info", f"{count}{functions}; the others load on first use")


def _functions_check(client: redis.Redis) -> Check:
    """The function library that savers of this version call (functions.py), and those of
    other versions, which stay on the server until deleted."""
    name = function_library()[0]
    try:
        listing = client.function_list(library="rediskv_*", withcode=True)
    except redis.exceptions.ResponseError as exc:
        if str(exc).lower().startswith("unknown"):
            return _check("functions", "info", "the server has no functions: savers run scripts")
        return _check("functions", "unknown", refused("FUNCTION LIST", exc))
    state, others = versions_on_server(listing)
    old = (
        f"; {len(others)} of other versions ({', '.join(others)}): `rediskv libraries "
        "--delete-old` deletes them"
        if others
        else ""
    )
    if state == "not loaded":
        return _check("functions", "info", f"{name} not loaded yet (loaded on first use){old}")
    if state == "other code":
        return _check(
            "functions",
            "warn",
            f"{name} holds other code than this version's: savers run scripts instead "
            f"(FUNCTION DELETE {name}, then a restart of their processes, lets them load "
            f"their own){old}",
        )
    return _check("functions", "ok", f"{name} loaded{old}")


def _metadata_indexes_check(client: redis.Redis, schema: KeySchema) -> Check:
    """The registry P:mk: a key still "building" has an index that misses older checkpoints,
    so filters on it scan every thread until a reindex completes it."""
    try:
        registry = client.hgetall(schema.metadata_keys())
    except redis.exceptions.ResponseError as exc:
        return _check("metadata-indexes", "unknown", refused("HGETALL", exc))
    states = index_states(registry)
    building = sorted(k for k, state in states.items() if state != "ready")
    if building:
        return _check(
            "metadata-indexes",
            "warn",
            f"still building: {', '.join(building)} (filters on them scan every thread until "
            "`rediskv reindex` completes them)",
        )
    if not states:
        return _check("metadata-indexes", "ok", "none registered")
    return _check("metadata-indexes", "ok", f"ready: {', '.join(sorted(states))}")


def cmd_doctor(args: argparse.Namespace) -> int:
    problems: list[Problem] = []
    with open_saver(args) as saver:
        client = saver.client
        if not isinstance(client, redis.Redis):  # the CLI connects to one server
            raise CliError("doctor checks a single server, not a cluster")
        checks = [
            _from_info(client, "server", "server", _server),
            _memory_check(client, KeySchema(saver.prefix)),
            _persistence_check(client),
        ]
        functions = _functions_check(client)
        library = function_library()[0] if functions["status"] == "ok" else None
        checks += [
            _scripts_check(client, library),  # before the invariant check, which loads one
            functions,
            _metadata_indexes_check(client, KeySchema(saver.prefix)),
        ]
        prefix = saver.prefix
        repaired: list[str] = []
        reindexed = 0
        try:
            problems = saver.check_invariants()
            if getattr(args, "repair", False):
                repaired = remove_orphans(client, problems)
                if any(p.problem in LOST_INDEX_ENTRIES for p in problems):
                    # index entries the records list but an eviction took: written again
                    reindexed = saver.reindex_metadata()
                if repaired or reindexed:
                    problems = saver.check_invariants()
        except redis.exceptions.NoPermissionError as exc:
            checks.append(_check("invariants", "unknown", refused("the check", exc)))
        else:
            if repaired:
                checks.append(
                    _check("repair", "info", f"removed {len(repaired)} key(s) no index led to")
                )
            if reindexed:
                checks.append(
                    _check("reindex", "info", f"rewrote {reindexed} index entries an eviction took")
                )
            broken = [p for p in problems if not p.stale]
            if broken:
                status, text = "fail", f"{len(broken)} problem(s) under prefix {prefix!r}"
            elif problems:
                # entries whose key expired: readers skip them and sweep them as they go
                status = "warn"
                text = f"{len(problems)} stale index entries under prefix {prefix!r}"
            else:
                status, text = "ok", f"no problems under prefix {prefix!r}"
            checks.append(_check("invariants", status, text))
    statuses = {c["status"] for c in checks}
    # a check that could not run is not a pass: the result is "unknown", unless one failed
    result = "fail" if "fail" in statuses else "unknown" if "unknown" in statuses else "ok"
    code = {"fail": FAILED, "unknown": UNKNOWN, "ok": 0}[result]
    if args.json:
        emit_json(
            {
                "prefix": prefix,
                "ok": result == "ok",
                "result": result,
                "checks": checks,
                "problems": [{"problem": p.problem, "key": p.key} for p in problems],
            }
        )
        return code
    console = make_console()
    styles = {"ok": "green", "info": "cyan", "warn": "yellow", "fail": "bold red"}
    styles["unknown"] = "magenta"
    width = max(len(c["check"]) for c in checks)
    status_width = max(4, *(len(c["status"]) for c in checks))
    for check in checks:
        status = check["status"]
        console.print(
            f"[{styles[status]}]{status:<{status_width}}[/]  [bold]{check['check']:<{width}}[/]  "
            + escape(check["detail"]),
            soft_wrap=True,
        )
    for problem in problems:
        console.print(escape(f"  {problem.problem}: {problem.key}"), soft_wrap=True)
    if result == "fail":
        console.print(f"[bold red]doctor found problems[/] (exit code {code})")
    elif result == "unknown":
        console.print(f"[magenta]doctor could not run every check[/] (exit code {code})")
    else:
        console.print("no problems")
    return code
