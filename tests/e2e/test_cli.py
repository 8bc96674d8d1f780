"""The inspection and maintenance commands of ``rediskv``, run as a user runs them:
``python -m langgraph.checkpoint.rediskv --url ... --prefix ... COMMAND`` in a subprocess, on
the server under test. Commands that only read are started together to save time."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator, Sequence
from typing import Any

import pytest
import redis

from langgraph.checkpoint.rediskv import RedisSaver
from langgraph.checkpoint.rediskv.demo import build_graph
from langgraph.checkpoint.rediskv.keys import KeySchema

from ..conftest import PrivateServer, data_keys, keys_of, snapshot
from ..integration.test_contract import cfg, make_checkpoint
from ..integration.test_security import SAVER_COMMANDS

MODULE = "langgraph.checkpoint.rediskv"
# fixed, so that rich lays tables out the same way wherever the tests run
ENV = {
    **{k: v for k, v in os.environ.items() if k not in ("FORCE_COLOR", "TTY_COMPATIBLE")},
    "COLUMNS": "200",
}


class Cli:
    """Runs ``rediskv --url URL --prefix PREFIX ...`` in subprocesses."""

    def __init__(self, url: str, prefix: str) -> None:
        self.url, self.prefix = url, prefix

    def argv(self, args: Sequence[str]) -> list[str]:
        return [sys.executable, "-m", MODULE, "--url", self.url, "--prefix", self.prefix, *args]

    def run_many(self, *commands: Sequence[str]) -> list[subprocess.CompletedProcess[str]]:
        """Run the commands concurrently; their results, in order."""
        procs = [
            subprocess.Popen(
                self.argv(args),
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                env=ENV,
            )
            for args in commands
        ]
        results = []
        for args, proc in zip(commands, procs, strict=True):
            out, err = proc.communicate(timeout=120)
            results.append(subprocess.CompletedProcess(list(args), proc.returncode, out, err))
        return results

    def run(self, *args: str) -> subprocess.CompletedProcess[str]:
        (result,) = self.run_many(args)
        return result

    def ok(self, *args: str) -> str:
        """stdout of a command that must succeed quietly."""
        result = self.run(*args)
        assert result.returncode == 0, result.stderr
        assert result.stderr == ""
        return result.stdout


def strict_json(text: str) -> Any:
    """``json.loads`` that refuses what is not JSON (Python accepts NaN and Infinity)."""

    def refuse(constant: str) -> Any:
        raise ValueError(f"not JSON: {constant}")

    return json.loads(text, parse_constant=refuse)


def json_of(result: subprocess.CompletedProcess[str]) -> Any:
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    return strict_json(result.stdout)


def table_rows(text: str, title: str) -> list[list[str]]:
    """The body rows of the rich table under the line containing ``title`` (cells of rows
    drawn with │; the header uses ┃, separators ┼)."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if title in line)
    rows = []
    for line in lines[start + 1 :]:
        if line.startswith("└"):
            break
        if line.startswith("│"):
            rows.append([cell.strip() for cell in line.strip().strip("│").split("│")])
    return rows


def one_line_error(result: subprocess.CompletedProcess[str], code: int = 1) -> str:
    assert result.returncode == code, (result.stdout, result.stderr)
    assert result.stdout == ""
    assert "Traceback" not in result.stderr
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    return lines[0]


def say(graph: Any, thread_id: str, text: str) -> None:
    graph.invoke({"messages": [("user", text)]}, {"configurable": {"thread_id": thread_id}})


def short(ts: str) -> str:
    """How the tables print a checkpoint's ts (UTC, to the second)."""
    return ts[:19].replace("T", " ")


def thread_memory(client: redis.Redis, prefix: str, thread_id: str) -> tuple[int, int]:
    """(keys, MEMORY USAGE bytes as the CLI estimates them) of one thread, found by a SCAN."""
    keys = list(client.scan_iter(match=KeySchema(prefix).thread_keys_pattern(thread_id)))
    return len(keys), sum(int(client.memory_usage(k, samples=5) or 0) for k in keys)


def config(thread_id: str) -> Any:
    return {"configurable": {"thread_id": thread_id}}


@pytest.fixture
def cli(server_url: str, prefix: str) -> Cli:
    return Cli(server_url, prefix)


@pytest.fixture
def store(server_url: str, prefix: str) -> Iterator[RedisSaver]:
    """Three chat threads: alpha (2 turns, the most recent activity), beta (1 turn, expiring
    in an hour), gamma (3 turns)."""
    with RedisSaver(server_url, prefix=prefix) as saver:
        graph = build_graph(saver)
        say(graph, "alpha", "alpha 0")
        say(graph, "beta", "beta 0")
        for i in range(3):
            say(graph, "gamma", f"gamma {i}")
        say(graph, "alpha", "alpha 1")
        saver.set_thread_ttl("beta", 60)
        yield saver


@pytest.mark.slow
def test_read_commands(cli: Cli, store: RedisSaver, client: redis.Redis, prefix: str) -> None:
    gamma = list(store.list(config("gamma")))
    alpha = list(store.list(config("alpha")))
    with_writes = gamma[2]  # the input checkpoint of gamma's last turn: it has pending writes
    threads, page, history, history_text, show, show_text, stats = cli.run_many(
        ["threads", "--json"],
        ["threads", "--limit", "2", "--offset", "1"],
        ["history", "gamma", "--json", "--limit", "4"],
        ["history", "alpha"],
        ["show", "gamma", "--json"],
        ["show", "gamma", with_writes.config["configurable"]["checkpoint_id"]],
        ["stats", "--json"],
    )

    # threads: newest activity first, with checkpoints, MEMORY USAGE and ttl; the keys the
    # CLI finds from each thread's root are the keys a SCAN of the thread finds
    listed = json_of(threads)
    beta_ttl = listed["threads"][2]["ttl"]
    assert 3500 < beta_ttl <= 3600
    newest = {t: store.get_tuple(config(t)) for t in ("alpha", "beta", "gamma")}
    assert listed == {
        "prefix": prefix,
        "total": 3,
        "offset": 0,
        "limit": 20,
        "memory_note": "estimate: MEMORY USAGE of each key, SAMPLES 5",
        "threads": [
            {
                "thread_id": t,
                "last_activity": newest[t].checkpoint["ts"],  # type: ignore[union-attr]
                "checkpoints": n,
                "size_bytes": thread_memory(client, prefix, t)[1],
                "ttl": ttl,
            }
            for t, n, ttl in (("alpha", 6, None), ("gamma", 9, None), ("beta", 3, beta_ttl))
        ],
    }
    assert page.returncode == 0, page.stderr
    rows = table_rows(page.stdout, f"Threads under prefix '{prefix}' (newest first)")
    assert [(r[0], r[1], r[2], r[4]) for r in rows] == [
        ("gamma", short(newest["gamma"].checkpoint["ts"]), "9", "none"),  # type: ignore[union-attr]
        ("beta", short(newest["beta"].checkpoint["ts"]), "3", rows[1][4]),  # type: ignore[union-attr]
    ]
    assert rows[1][4].endswith("s") and 3500 < int(rows[1][4][:-1]) <= 3600
    assert page.stdout.splitlines()[-1] == "threads 2-3 of 3"

    # history: the newest checkpoints with step, source, pending writes and time
    assert (
        json_of(history)
        == {
            "thread_id": "gamma",
            "total": 9,
            "checkpoints": [
                {
                    "checkpoint_id": t.config["configurable"]["checkpoint_id"],
                    "checkpoint_ns": "",
                    "parent_id": t.parent_config["configurable"]["checkpoint_id"],  # type: ignore[index]
                    "step": step,
                    "source": source,
                    "pending_writes": writes,
                    "ts": t.checkpoint["ts"],
                }
                for t, (step, source, writes) in zip(
                    gamma[:4],
                    [(7, "loop", 0), (6, "loop", 1), (5, "input", 2), (4, "loop", 0)],
                    strict=True,
                )
            ],
        }
    )
    assert history_text.returncode == 0, history_text.stderr
    assert table_rows(history_text.stdout, "Checkpoints of thread 'alpha'") == [
        [
            t.config["configurable"]["checkpoint_id"],
            str(t.metadata["step"]),
            t.metadata["source"],
            str(len(t.pending_writes or [])),
            short(t.checkpoint["ts"]),
        ]
        for t in alpha
    ]
    assert history_text.stdout.splitlines()[-1] == "6 of 6 checkpoints"

    # show: the latest state, its metadata and parent
    latest = gamma[0]
    messages = latest.checkpoint["channel_values"]["messages"]
    shown = json_of(show)
    assert shown == {
        "thread_id": "gamma",
        "checkpoint_ns": "",
        "checkpoint_id": latest.config["configurable"]["checkpoint_id"],
        "parent_id": gamma[1].config["configurable"]["checkpoint_id"],
        "ts": latest.checkpoint["ts"],
        "metadata": {"source": "loop", "step": 7, "parents": {}},
        "channel_values": {
            "messages": [{"type": m.type, "content": m.content, "id": m.id} for m in messages]
        },
        "pending_writes": [],
    }
    assert [m["content"] for m in shown["channel_values"]["messages"]] == [
        "gamma 0",
        "echo #1: gamma 0",
        "gamma 1",
        "echo #2: gamma 1",
        "gamma 2",
        "echo #3: gamma 2",
    ]

    # show CHECKPOINT: messages as "type: content" lines, the pending writes in a table
    assert show_text.returncode == 0, show_text.stderr
    out = show_text.stdout
    assert f"checkpoint  {with_writes.config['configurable']['checkpoint_id']}" in out
    assert f"parent      {gamma[3].config['configurable']['checkpoint_id']}" in out
    state = table_rows(out, "State (channel values)")
    assert state[:4] == [
        ["messages", "human: gamma 0"],
        ["", "ai: echo #1: gamma 0"],
        ["", "human: gamma 1"],
        ["", "ai: echo #2: gamma 1"],
    ]
    assert ["__start__", "{'messages': [['user', 'gamma 2']]}"] in state
    assert "{'source': 'input', 'step': 5, 'parents': {}}" in out.splitlines()
    writes = table_rows(out, "Pending writes")
    assert [(task, channel) for task, channel, _ in writes] == [
        (task, channel) for task, channel, _ in with_writes.pending_writes or []
    ]
    assert writes[0][1:] == ["messages", "[['user', 'gamma 2']]"]

    # stats: keys by kind, threads, MEMORY USAGE (sampled), the largest threads
    all_keys = keys_of(client, f"{prefix}:*")
    sizes = {t: thread_memory(client, prefix, t) for t in ("alpha", "beta", "gamma")}
    assert json_of(stats) == {
        "prefix": prefix,
        "keys": len(all_keys),
        "threads": 3,
        # every key under the prefix: the threads' and the global metadata indexes
        "memory_bytes": sum(int(client.memory_usage(k, samples=5) or 0) for k in all_keys),
        "memory_note": "estimate: MEMORY USAGE of each key, SAMPLES 5",
        "keys_by_kind": dict(sorted(Counter(k.split(":")[1] for k in all_keys).items())),
        "top_threads": [
            {"thread_id": t, "keys": sizes[t][0], "size_bytes": sizes[t][1]}
            for t in sorted(sizes, key=lambda t: (-sizes[t][1], t))
        ],
    }
    assert [s[1] for s in sorted(sizes.values(), reverse=True)] == [
        sizes[t][1] for t in ("gamma", "alpha", "beta")
    ]


def test_copy_delete_prune(cli: Cli, server_url: str, prefix: str, client: redis.Redis) -> None:
    with RedisSaver(server_url, prefix=prefix) as saver:
        graph = build_graph(saver)
        for turn in range(2):
            say(graph, "alpha", f"alpha {turn}")
        say(graph, "beta", "beta 0")

        copied = json_of(cli.run("copy", "alpha", "alpha copy", "--json"))
        assert copied == {
            "source": "alpha",
            "target": "alpha copy",
            "checkpoints": 6,
            "keys": thread_memory(client, prefix, "alpha copy")[0],
            "ttl": None,
        }
        assert [t.checkpoint for t in saver.list(config("alpha copy"))] == [
            t.checkpoint for t in saver.list(config("alpha"))
        ]

        beta_keys = thread_memory(client, prefix, "beta")[0]
        assert beta_keys > 0
        assert cli.ok("delete", "beta").splitlines() == [
            f"deleted thread 'beta' under prefix '{prefix}': {beta_keys} keys before, 0 after"
        ]
        assert keys_of(client, KeySchema(prefix).thread_keys_pattern("beta")) == []

        alpha_keys = thread_memory(client, prefix, "alpha")[0]
        pruned = json_of(cli.run("prune", "alpha", "--json"))
        assert pruned == {
            "prefix": prefix,
            "strategy": "keep_latest",
            "threads": 1,
            "checkpoints_before": 6,
            "checkpoints_after": 1,
            "keys_before": alpha_keys,
            "keys_after": thread_memory(client, prefix, "alpha")[0],
        }
        assert len(list(saver.list(config("alpha")))) == 1
        assert len(list(saver.list(config("alpha copy")))) == 6  # only the named thread

        # the threads' keys: not the global indexes (metadata, threads by value)
        global_keys = keys_of(client, f"{prefix}:mi:*") + keys_of(client, f"{prefix}:tm:*")
        before = len(data_keys(client, prefix)) - len(global_keys)
        removed = json_of(cli.run("prune", "--all", "--strategy", "delete_all", "--json"))
        assert removed == {
            "prefix": prefix,
            "strategy": "delete_all",
            "threads": 2,
            "checkpoints_before": 7,
            "checkpoints_after": 0,
            "keys_before": before,
            "keys_after": 0,
        }
        assert data_keys(client, prefix) == []


def test_doctor(cli: Cli, server_url: str, prefix: str, client: redis.Redis) -> None:
    with RedisSaver(server_url, prefix=prefix) as saver:
        graph = build_graph(saver)
        say(graph, "alpha", "alpha 0")

        clean = cli.ok("doctor").splitlines()
        assert clean[-1] == "no problems"
        assert clean[0].startswith(
            ("ok    server            Redis ", "ok    server            Valkey ")
        )
        assert f"ok    invariants        no problems under prefix '{prefix}'" in clean
        assert any(line.startswith(("ok    persistence", "warn  persistence")) for line in clean)

        # corrupt the store: a blob of the latest checkpoint disappears (no ttl: it was lost)
        newest = saver.get_tuple(config("alpha"))
        assert newest is not None
        version = newest.checkpoint["channel_versions"]["messages"]
        key = KeySchema(prefix).blob(KeySchema.tag("alpha"), "", "messages", version)
        assert client.unlink(key) == 1
        expected = saver.check_invariants()
        assert [(p.problem, p.key, p.stale) for p in expected] == [
            ("checkpoint without blob", key, False)
        ]

    as_json, as_text = cli.run_many(["doctor", "--json"], ["doctor"])
    assert as_json.returncode == 2, as_json.stderr
    report = json.loads(as_json.stdout)
    assert report["ok"] is False
    assert report["problems"] == [{"problem": p.problem, "key": p.key} for p in expected]
    assert [c["check"] for c in report["checks"]] == [
        "server",
        "maxmemory-policy",
        "persistence",
        "scripts",
        "functions",
        "metadata-indexes",
        "invariants",
    ]
    assert report["checks"][-1] == {
        "check": "invariants",
        "status": "fail",
        "detail": f"{len(expected)} problem(s) under prefix '{prefix}'",
    }
    assert as_text.returncode == 2, as_text.stderr
    lines = as_text.stdout.splitlines()
    for problem in expected:
        assert f"  {problem.problem}: {problem.key}" in lines
    assert lines[-1] == "doctor found problems (exit code 2)"


@pytest.mark.slow
def test_errors_are_one_line(cli: Cli, server_url: str, prefix: str, client: redis.Redis) -> None:
    with RedisSaver(server_url, prefix=prefix) as saver:
        graph = build_graph(saver)
        say(graph, "alpha", "alpha 0")
        say(graph, "beta", "beta 0")
    before = snapshot(client, f"{prefix}:*")

    (
        unknown,
        delete_unknown,
        no_server,
        bad_limit,
        bad_checkpoint,
        copy_onto,
        prune_nothing,
        bad_prefix,
    ) = cli.run_many(
        ["history", "nope"],
        ["delete", "nope", "--json"],
        ["threads", "--url", "redis://127.0.0.1:1/0"],  # options after the command win
        ["threads", "--limit", "0"],
        ["show", "alpha", "nope"],
        ["copy", "alpha", "beta"],
        ["prune"],
        ["threads", "--prefix", "no:colons"],
    )
    assert one_line_error(unknown) == (
        f"rediskv: error: thread 'nope' has no checkpoints under prefix '{prefix}'"
    )
    assert one_line_error(delete_unknown) == (
        f"rediskv: error: thread 'nope' has no checkpoints under prefix '{prefix}'"
    )
    assert one_line_error(no_server).startswith(
        "rediskv: error: cannot reach Redis at redis://127.0.0.1:1/0: "
    )
    assert one_line_error(bad_limit, code=2) == (
        "rediskv threads: error: argument --limit: must be at least 1, got 0 "
        "(see: rediskv threads --help)"
    )
    assert one_line_error(bad_checkpoint) == (
        f"rediskv: error: no checkpoint 'nope' in thread 'alpha', namespace '', "
        f"under prefix '{prefix}'"
    )
    assert one_line_error(copy_onto) == (
        f"rediskv: error: thread 'beta' already has checkpoints under prefix '{prefix}': "
        "delete it first, or copy to a new thread id"
    )
    assert one_line_error(prune_nothing) == (
        "rediskv: error: give the thread ids to prune, or --all for every thread"
    )
    assert one_line_error(bad_prefix).startswith("rediskv: error: invalid key prefix 'no:colons'")
    assert snapshot(client, f"{prefix}:*") == before  # nothing was changed


# -- cost: what a command asks of the server does not grow with unrelated keys ---------------


class ServerLog:
    """What a private server was asked since :meth:`reset`: call counts (INFO commandstats)
    and every command with its arguments (a slow log that records everything)."""

    def __init__(self, url: str) -> None:
        self.admin = redis.Redis.from_url(url)
        self.admin.config_set("slowlog-log-slower-than", 0)
        self.admin.config_set("slowlog-max-len", 1_000_000)

    def reset(self) -> None:
        self.admin.config_resetstat()
        self.admin.slowlog_reset()

    def calls(self, command: str) -> int:
        stats: dict[str, Any] = self.admin.info("commandstats")
        return int(stats.get(f"cmdstat_{command}", {}).get("calls", 0))

    def commands(self, name: str) -> list[list[str]]:
        """The arguments of every logged command whose name is ``name`` (e.g. "MEMORY")."""
        entries = self.admin.slowlog_get(-1)
        commands = [entry["command"].decode().split(" ") for entry in entries]
        return [c for c in commands if c[0].upper() == name]


def fill_unrelated(admin: redis.Redis, total: int) -> None:
    """Top the keys outside any prefix of the test up to ``total`` (keys ``other:N``)."""
    have = sum(1 for _ in admin.scan_iter(match="other:*", count=1000))
    for first in range(have, total, 1000):
        admin.mset({f"other:{i}": "x" for i in range(first, min(first + 1000, total))})


def scan_pass_calls(admin: redis.Redis, pattern: str) -> int:
    """How many SCAN calls one pass over the keyspace takes."""
    calls, cursor = 0, 0
    while True:
        cursor, _ = admin.scan(cursor, match=pattern, count=1000)
        calls += 1
        if cursor == 0:
            return calls


def put_history(saver: RedisSaver, thread_id: str, checkpoints: int, **metadata: Any) -> None:
    """``checkpoints`` checkpoints in a chain, each writing channel "v"."""
    config = cfg(thread_id)
    version = None
    for step in range(checkpoints):
        version = saver.get_next_version(version, None)
        checkpoint = make_checkpoint({"v": step}, {"v": version})
        config = saver.put(config, checkpoint, {"step": step, **metadata}, {"v": version})


def test_cost_does_not_grow_with_unrelated_keys(private_server: PrivateServer, prefix: str) -> None:
    log = ServerLog(private_server.url)
    cli = Cli(private_server.url, prefix)
    names = [f"thread-{i:02}" for i in range(50)]
    with RedisSaver(private_server.url, prefix=prefix) as saver:
        for name in names:
            put_history(saver, name, 2)
    measured = {}
    for unrelated in (5_000, 40_000):
        fill_unrelated(log.admin, unrelated)
        one_pass = scan_pass_calls(log.admin, KeySchema(prefix).thread_pattern())
        log.reset()
        listed = json_of(cli.run("threads", "--limit", "50", "--json"))
        assert [t["thread_id"] for t in listed["threads"]] == names[::-1]  # newest first
        threads_scans = log.calls("scan")
        log.reset()
        json_of(cli.run("prune", *names[:10], "--json"))
        measured[unrelated] = (one_pass, threads_scans, log.calls("scan"))
    print(f"SCAN calls (one pass, threads --limit 50, prune of 10 threads): {measured}")
    # threads: the one pass that finds the threads, nothing per listed thread; prune of named
    # threads: no SCAN at all (each thread is read from its own keys)
    assert measured == {n: (one_pass, one_pass, 0) for n, (one_pass, _, _) in measured.items()}

    # stats: one pass, and MEMORY USAGE samples a few elements of each key (SAMPLES 0 reads
    # every element of a global index: milliseconds of blocked server on a large one)
    log.reset()
    stats = json_of(cli.run("stats", "--json"))
    assert stats["memory_note"] == "estimate: MEMORY USAGE of each key, SAMPLES 5"
    usages = log.commands("MEMORY")
    assert len(usages) == stats["keys"] > 0
    assert {tuple(u[3:]) for u in usages} == {("SAMPLES", "5")}
    assert log.calls("scan") == scan_pass_calls(log.admin, f"{prefix}:*")
    log.admin.close()


# -- least privilege: the saver's own commands are enough -------------------------------------


def acl_user(admin: redis.Redis, name: str, prefix: str, *extra: str) -> str:
    """A user limited to the prefix and the saver's commands (and ``extra``); its URL."""
    try:  # redis-py announces itself with CLIENT SETINFO where the server has it (7.2+)
        admin.acl_setuser("probe", commands=["+client|setinfo"])
        extra += ("+client|setinfo",)
    except redis.exceptions.ResponseError:
        pass
    admin.acl_setuser(
        name,
        enabled=True,
        reset=True,
        passwords=["+s3cret"],
        keys=[f"{prefix}:*"],
        commands=[f"+{c}" for c in SAVER_COMMANDS] + list(extra),
    )
    port = admin.connection_pool.connection_kwargs["port"]
    return f"redis://{name}:s3cret@127.0.0.1:{port}/0"


def refusals(url: str, prefix: str) -> tuple[str, str]:
    """What the server says when the user asks for INFO, and for MEMORY USAGE."""
    with redis.Redis.from_url(url) as user:
        with pytest.raises(redis.exceptions.NoPermissionError) as info:
            user.info("server")
        with pytest.raises(redis.exceptions.NoPermissionError) as memory:
            user.memory_usage(f"{prefix}:mk")
    return str(info.value), str(memory.value)


def check_of(report: dict[str, Any], name: str) -> dict[str, str]:
    (check,) = [c for c in report["checks"] if c["check"] == name]
    return check


@pytest.mark.slow
def test_every_command_works_as_the_least_privilege_user(
    private_server: PrivateServer, prefix: str
) -> None:
    admin = redis.Redis(port=private_server.port)
    with RedisSaver(private_server.url, prefix=prefix) as saver:
        graph = build_graph(saver)
        say(graph, "alpha", "alpha 0")
        say(graph, "alpha", "alpha 1")
        say(graph, "beta", "beta 0")
        saver.set_thread_ttl("beta", 60)
    url = acl_user(admin, "saver", prefix)
    cli = Cli(url, prefix)
    info_denied, memory_denied = refusals(url, prefix)

    threads, history, show, stats, doctor, doctor_text = cli.run_many(
        ["threads", "--json"],
        ["history", "alpha", "--json"],
        ["show", "alpha", "--json"],
        ["stats", "--json"],
        ["doctor", "--json"],
        ["doctor"],
    )
    denied = f"unknown: MEMORY USAGE is not allowed ({memory_denied})"
    listed = json_of(threads)
    assert listed["memory_note"] == denied
    assert [(t["thread_id"], t["checkpoints"], t["size_bytes"]) for t in listed["threads"]] == [
        ("beta", 3, None),
        ("alpha", 6, None),
    ]
    assert 3500 < listed["threads"][0]["ttl"] <= 3600  # from PTTL
    assert json_of(history)["total"] == 6
    assert json_of(show)["channel_values"]["messages"][-1]["content"] == "echo #2: alpha 1"
    counted = json_of(stats)
    assert (counted["threads"], counted["memory_bytes"]) == (2, None)
    assert counted["memory_note"] == denied

    # doctor: what it may not look at is "unknown" with the reason, and the result is not ok
    assert doctor.returncode == 3, doctor.stderr
    report = strict_json(doctor.stdout)
    assert (report["ok"], report["result"]) == (False, "unknown")
    statuses = {c["check"]: c["status"] for c in report["checks"]}
    # "info" while some scripts are not loaded yet (the commands run alongside load them)
    assert statuses.pop("scripts") in ("ok", "info")
    assert statuses.pop("functions") in ("ok", "info", "unknown")
    assert statuses == {
        "server": "unknown",
        "maxmemory-policy": "unknown",
        "persistence": "unknown",
        "metadata-indexes": "ok",
        "invariants": "ok",
    }
    assert check_of(report, "persistence")["detail"] == f"INFO is not allowed ({info_denied})"
    assert doctor_text.returncode == 3
    last_line = doctor_text.stdout.splitlines()[-1]
    assert last_line == "doctor could not run every check (exit code 3)"

    # with INFO but without CONFIG: a server without persistence is not reported as "ok"
    info_cli = Cli(acl_user(admin, "saver-info", prefix, "+info"), prefix)
    result = info_cli.run("doctor", "--json")
    assert result.returncode == 3, result.stderr
    report = strict_json(result.stdout)
    assert check_of(report, "persistence") == {
        "check": "persistence",
        "status": "unknown",
        "detail": "aof off, rdb unknown (CONFIG GET is not allowed): the server may keep no "
        "copy on disk",
    }
    assert check_of(report, "server")["status"] == "ok"

    # the changing commands
    copied = json_of(cli.run("copy", "alpha", "alpha-copy", "--json"))
    assert (copied["checkpoints"], copied["ttl"]) == (6, None)
    pruned = json_of(cli.run("prune", "alpha", "--json"))
    assert (pruned["checkpoints_before"], pruned["checkpoints_after"]) == (6, 1)
    deleted = json_of(cli.run("delete", "alpha-copy", "--json"))
    assert deleted["keys_before"] > 0 and deleted["keys_after"] == 0
    assert json_of(cli.run("reindex", "--json"))["added"] == 0
    admin.close()


# -- reindex, and the doctor's view of metadata indexes ----------------------------------------


def test_reindex_completes_building_indexes(
    cli: Cli, server_url: str, prefix: str, client: redis.Redis
) -> None:
    with RedisSaver(server_url, prefix=prefix, index_metadata=()) as saver:
        put_history(saver, "old", 3, user="ana", topic="tea")
    with RedisSaver(server_url, prefix=prefix, index_metadata=("user",)) as saver:
        put_history(saver, "new", 1, user="bob")  # registers "user" on a store with threads
    # (the threads-by-value indexes were registered by the first put, on an empty store)
    assert client.hgetall(f"{prefix}:mk") == {b"\0threads": b"ready", b"user": b"building"}

    report = strict_json(cli.run("doctor", "--json").stdout)
    assert check_of(report, "metadata-indexes") == {
        "check": "metadata-indexes",
        "status": "warn",
        "detail": "still building: user (filters on them scan every thread until "
        "`rediskv reindex` completes them)",
    }

    # the 3 old checkpoints join the user index; --index registers and builds topic too
    reindexed = json_of(cli.run("reindex", "--index", "topic", "--json"))
    assert reindexed == {
        "prefix": prefix,
        "added": 6,
        "indexes": {"(threads by value)": "ready", "topic": "ready", "user": "ready"},
    }
    report = strict_json(cli.ok("doctor", "--json"))
    assert check_of(report, "metadata-indexes") == {
        "check": "metadata-indexes",
        "status": "ok",
        "detail": "ready: (threads by value), topic, user",
    }
    with RedisSaver(server_url, prefix=prefix, index_metadata=("user", "topic")) as saver:
        assert len(list(saver.list(None, filter={"user": "ana"}))) == 3
    assert cli.ok("reindex").splitlines() == [
        f"added 0 index entries under prefix '{prefix}'; "
        "indexes: (threads by value) ready, topic ready, user ready"
    ]


def test_index_states_name_a_claimed_key_building() -> None:
    """A reindex claims the keys it completes as "building:<token>" (one that stopped, or
    runs meanwhile, leaves them so): the CLI says "building", not the token."""
    from langgraph.checkpoint.rediskv.cli.common import index_states

    registry = {b"user": b"building:3f2a9c", b"\0threads": b"ready", b"a%20b": b"building"}
    assert index_states(registry) == {
        "(threads by value)": "ready",
        "a%20b": "building",
        "user": "building",
    }


def test_a_registry_lost_under_a_saver_is_building_again(
    cli: Cli, server_url: str, prefix: str, client: redis.Redis
) -> None:
    """A saver registers its indexes once: with the registry deleted under it (a FLUSHDB, or
    by hand) it went on writing indexes that no reader trusted, and every filter scanned every
    thread, while doctor said "none registered", ok. Its next put registers them again as
    "building", which doctor names, until a reindex. (A registry name is the raw key: doctor
    wrote "a b" for the key "a%20b".)"""
    with RedisSaver(server_url, prefix=prefix, index_metadata=("user", "a%20b")) as saver:
        put_history(saver, "a", 2, user="ana", **{"a%20b": "x"})
        client.delete(f"{prefix}:mk")
        put_history(saver, "b", 1, user="bob")
        assert client.hgetall(f"{prefix}:mk") == {
            b"\0threads": b"building",
            b"user": b"building",
            b"a%20b": b"building",
        }
        report = strict_json(cli.run("doctor", "--json").stdout)
        assert check_of(report, "metadata-indexes") == {
            "check": "metadata-indexes",
            "status": "warn",
            "detail": "still building: (threads by value), a%20b, user (filters on them scan "
            "every thread until `rediskv reindex` completes them)",
        }
        json_of(cli.run("reindex", "--json"))
        report = strict_json(cli.ok("doctor", "--json"))
        assert check_of(report, "metadata-indexes") == {
            "check": "metadata-indexes",
            "status": "ok",
            "detail": "ready: (threads by value), a%20b, user",
        }
        assert [t.config["configurable"]["thread_id"] for t in saver.list(
            None, filter={"user": "ana"})] == ["a", "a"]  # fmt: skip


# -- show --json: valid JSON whatever the state holds -------------------------------------------


def test_show_json_is_valid_for_any_state(cli: Cli, saver: RedisSaver) -> None:
    nan, inf = float("nan"), float("inf")
    values = {
        "floats": [nan, inf, -inf, 1.5],
        "by_pair": {("a", 1): "x", (2, 3): {"n": nan}},
        "keys": {1: "one", None: "none", 2.5: "float", inf: "inf"},
    }
    versions = {channel: saver.get_next_version(None, None) for channel in values}
    checkpoint = make_checkpoint(values, versions)
    saver.put(cfg("odd"), checkpoint, {"source": "input", "step": -1, "score": nan}, versions)

    shown = json_of(cli.run("show", "odd", "--json"))  # strict: no NaN, no Infinity
    assert shown["channel_values"] == {
        # non-finite floats as the strings of the proto3 JSON mapping
        "floats": ["NaN", "Infinity", "-Infinity", 1.5],
        # keys that are not strings as json.dumps writes them, the others as their repr
        "by_pair": {"('a', 1)": "x", "(2, 3)": {"n": "NaN"}},
        "keys": {"1": "one", "null": "none", "2.5": "float", "Infinity": "inf"},
    }
    assert shown["metadata"] == {"source": "input", "step": -1, "score": "NaN"}
    assert cli.run("show", "odd").returncode == 0  # the tables print the same state
