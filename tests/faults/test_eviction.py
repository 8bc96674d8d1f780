"""A server that evicts under memory pressure (issue 31): chats through real graphs on a private
server with a small maxmemory until it evicts keys of the saver; then every read of a thread
is exact or CheckpointLostError (never an empty or shorter state taken for the whole thread),
a delete of each broken thread leaves nothing of it that does not expire, and doctor fails on
the policies that evict the saver's keys."""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import redis
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.base import Checkpoint, empty_checkpoint
from langgraph.checkpoint.base.id import uuid6
from langgraph.graph import END, START, MessagesState, StateGraph

from langgraph.checkpoint.rediskv import (
    AsyncRedisSaver,
    CheckpointLostError,
    RedisSaver,
    ShallowRedisSaver,
)
from langgraph.checkpoint.rediskv.eviction import FIX, eviction_risk
from langgraph.checkpoint.rediskv.keys import KeySchema, metadata_index_suffix

from ..conftest import PrivateServer

CHATS, TURNS = 60, 8
TTL = {"default_ttl": 60, "refresh_on_read": True}


def random_text() -> str:
    return base64.b64encode(os.urandom(300)).decode()  # (compression cannot shrink it)


def build_chat(saver: RedisSaver) -> Any:
    def bot(state: MessagesState) -> dict[str, Any]:
        return {"messages": [AIMessage(random_text(), id=f"ai-{len(state['messages'])}")]}

    builder = StateGraph(MessagesState)
    builder.add_node("bot", bot)
    builder.add_edge(START, "bot")
    builder.add_edge("bot", END)
    return builder.compile(checkpointer=saver)


def cfg(thread_id: str) -> Any:
    return {"configurable": {"thread_id": thread_id}}


def run_chats(saver: RedisSaver, restarted: set[str]) -> dict[str, list[str]]:
    """CHATS chats of TURNS turns, one turn of each at a time; what each chat holds after its
    last turn that went through (a turn whose first read finds the thread broken fails).
    ``restarted``: the chats a turn started again silently (its state lacks the turns before)."""
    graph = build_chat(saver)
    written: dict[str, list[str]] = {}
    for turn in range(TURNS):
        for chat in range(CHATS):
            thread = f"chat-{chat}"
            message = HumanMessage(random_text(), id=f"human-{turn}")
            try:
                state = graph.invoke({"messages": [message]}, cfg(thread))
            except CheckpointLostError as exc:
                assert exc.thread_id == thread
                continue
            if len(state["messages"]) < len(written.get(thread, [])) + 2:
                restarted.add(thread)
            written[thread] = [m.content for m in state["messages"]]
    return written


def leads_to(client: redis.Redis, keys: KeySchema, thread: str) -> int:
    """How many of the keys that lead to a thread's checkpoints are left: its root, its
    index, writes index and deadline ledger, its runs and its values."""
    tag = keys.tag(thread)
    return int(
        client.exists(
            keys.thread(tag),
            keys.index(tag, ""),
            keys.writes_index(tag, ""),
            keys.runs(tag),
            keys.thread_values(tag),
            keys.ledger(tag, ""),
        )
    )


def read_all(
    saver: RedisSaver, client: redis.Redis, written: dict[str, list[str]]
) -> dict[str, str]:
    """Each chat read back as the app does (its state, then its history): "exact"; "holes"
    when its history lacks checkpoints whose records were evicted whole, or "older" when the
    newest was (each such record taken for one that expired: what the deadline ledger,
    lua/include/ledger.lua, prevents, unless the ledger itself was evicted); "lost" when a
    read raised CheckpointLostError naming it (ThreadLostError for a thread evicted whole,
    which the registry of live threads, lua/thread_deadlines.lua, still holds as due); "gone"
    when it reads as a thread that never existed and eviction took every key that leads to
    its checkpoints, "empty" when some are left (every record evicted whole). Every state
    returned holds exactly the messages of its time. Anything else fails."""
    graph = build_chat(saver)
    keys = KeySchema(saver.prefix)
    outcome: dict[str, str] = {}
    for thread, messages in written.items():
        try:
            state = graph.get_state(cfg(thread))
            history = list(graph.get_state_history(cfg(thread)))
        except CheckpointLostError as exc:
            assert exc.thread_id == thread
            assert thread in str(exc) and "maxmemory-policy" in str(exc)
            outcome[thread] = "lost"
            continue
        if not state.values:
            # (every record of the thread evicted whole also reads so: each is taken for one
            # that expired, and the index they leave empty is forgotten)
            assert history == []
            outcome[thread] = "gone" if leads_to(client, keys, thread) == 0 else "empty"
            continue
        got = [m.content for m in state.values["messages"]]
        assert history[0].config == state.config
        if got != messages:
            # the newest checkpoint's record evicted whole is taken for one that expired: the
            # state before it, exactly (docs/reliability.md, Eviction)
            assert got == messages[: len(got)] and len(got) < len(messages)
            outcome[thread] = "older"
            continue
        # every step of the history holds exactly the messages of its time (never a mix)
        held = [len(step.values.get("messages", [])) for step in history]
        for step, count in zip(history, held, strict=True):
            assert [m.content for m in step.values.get("messages", [])] == messages[:count]
        # each turn wrote three steps: its input (the messages before it), the human's
        # message, the bot's; a history without one of them lost a whole record, which is
        # taken for one that expired (see "Eviction" in docs/reliability.md)
        whole = [2 * t - k for t in range(len(messages) // 2, 0, -1) for k in range(3)]
        outcome[thread] = "exact" if held == whole else "holes"
    return outcome


class EvictionLog:
    """Every key the server evicts, by its keyspace event, until stop(), which turns the
    server's limit off and returns them: all of them, the last ones evicted included."""

    def __init__(self, client: redis.Redis) -> None:
        self.client = client
        self.keys: list[str] = []
        client.config_set("notify-keyspace-events", "Ee")
        self.pubsub = client.pubsub()
        self.pubsub.subscribe(
            **{"__keyevent@0__:evicted": lambda m: self.keys.append(m["data"].decode())}
        )
        self.listener = self.pubsub.run_in_thread(sleep_time=0.01, daemon=True)

    def stop(self) -> list[str]:
        # The server evicts until its limit is off, not until the last write: an eviction
        # pass runs before every command while the memory is over maxmemory (and the events
        # a pass publishes for the listener are memory its own tally of what it freed leaves
        # out, so the next command, whatever it is, may evict again), and a pass that
        # overruns its time budget (maxmemory-eviction-tenacity) goes on in the background.
        # So the limit goes first, then the count: nothing is evicted after it, and the
        # listener stops once it holds that many. (Counted first, with the limit turned off
        # after the listener stopped, the pass before that CONFIG SET evicted 16 to 28 keys
        # unseen in every run: a deadline ledger among them, of a thread whose history had
        # lost a record, made that history's holes look silent.)
        self.client.config_set("maxmemory", "0")
        count = self.client.info("stats")["evicted_keys"]
        deadline = time.monotonic() + 10
        while len(self.keys) < count and time.monotonic() < deadline:
            time.sleep(0.05)
        self.listener.stop()
        self.listener.join(timeout=10)
        assert len(self.keys) == count
        return self.keys


def count_fall_backs(
    url: str, saver: RedisSaver, written: dict[str, list[str]], outcome: dict[str, str]
) -> int:
    """How many chats whose latest state raised CheckpointLostError (a lost value) read, with
    on_lost_checkpoint="fall_back", as an older state that is exactly the messages of its
    time (never a partial one)."""
    fell_back = 0
    with RedisSaver(url, prefix="ev", ttl=TTL, on_lost_checkpoint="fall_back") as fall_back:
        graph = build_chat(fall_back)
        for thread in sorted(t for t, o in outcome.items() if o == "lost"):
            try:
                saver.get_tuple(cfg(thread))
                continue  # (its history raised, not its latest state)
            except CheckpointLostError as exc:
                if exc.what != "value":
                    continue  # (no fallback for a lost root or index)
            try:
                state = graph.get_state(cfg(thread))
            except CheckpointLostError:
                continue  # (no checkpoint of it is complete)
            # (an older checkpoint with its pending writes, which get_state applies, may hold
            # every message: the bot's answer stored as a write before its checkpoint)
            got = [m.content for m in state.values.get("messages", [])]
            assert got == written[thread][: len(got)]
            fell_back += 1
    return fell_back


@pytest.mark.slow
@pytest.mark.parametrize("policy", ["volatile-lru", "allkeys-lru", "volatile-ttl"])
def test_an_evicting_server_never_makes_a_thread_silently_empty(
    tmp_path: Path, policy: str
) -> None:
    server = PrivateServer(tmp_path, maxmemory="3mb", **{"maxmemory-policy": policy}).start()
    try:
        client = redis.Redis.from_url(server.url)
        with RedisSaver(server.url, prefix="ev", ttl=TTL) as saver:
            restarted: set[str] = set()
            log = EvictionLog(client)
            written = run_chats(saver, restarted)
            evicted = log.stop()  # (what follows reads, deletes and checks)
            assert evicted
            outcome = read_all(saver, client, written)
            kinds = ("exact", "holes", "older", "lost", "gone", "empty")
            counts = {o: list(outcome.values()).count(o) for o in kinds}
            counts["fallback"] = count_fall_backs(server.url, saver, written, outcome)
            counts["restarted"] = len(restarted)

            # a record evicted whole is told from one that expired (the deadline ledger), a
            # thread evicted whole from a new one (the registry of live threads): no history
            # with holes, no older state, no thread empty or new while it is due, but where
            # the ledger itself was evicted (best effort: the records it named then read as
            # expired, until the next put makes it again), or the registry (allkeys-*).
            # Nor where eviction left no record of the thread, only its ledger (and blobs):
            # that reads as a thread deleted by 0.1.0, which leaves the ledger too. Nor in a
            # chat a turn already restarted silently during the run (its own column).
            keys = KeySchema(saver.prefix)
            registry_evicted = keys.live_threads() in set(evicted)
            unledgered = {
                t
                for t, o in outcome.items()
                if o != "gone" and keys.ledger(keys.tag(t), "") in set(evicted)
            }
            unregistered = {t for t, o in outcome.items() if o == "gone" and registry_evicted}
            recordless = {
                t
                for t in outcome
                if client.exists(keys.ledger(keys.tag(t), ""))
                and not any(client.scan_iter(match=keys.checkpoint(keys.tag(t), "", "*")))
            }
            silent = {t for t, o in outcome.items() if o in ("holes", "older", "empty", "gone")}
            told_apart = silent - unledgered - unregistered - recordless - restarted
            assert told_apart == set(), (counts, told_apart)
            counts["unledgered"] = len(silent & unledgered)
            counts["unregistered"] = len(unregistered)
            counts["recordless"] = len(silent & recordless - unledgered)
            print(f"{policy}: {counts}")  # (the figures of docs/reliability.md: pytest -s)
            lost = sorted(t for t, o in outcome.items() if o in ("lost", "gone"))
            for thread in lost:
                saver.delete_thread(thread)
                assert saver.get_tuple(cfg(thread)) is None
                assert list(saver.list(cfg(thread))) == []
            # the cleanup pass: the deletes above, then doctor --repair (it writes again the
            # index entries an eviction took, such as a thread's own threads-by-value set);
            # after it only stale entries remain (readers sweep them, and what no index leads
            # to expires), and no key of a thread lives forever
            code, checks = doctor(server.url, "ev", "--repair")
            # (the limit is off by now: the policy is a warning, not a failure; with a ttl,
            # what no index leads to expires by itself, and the repair leaves it)
            assert (code, checks["maxmemory-policy"], "repair" in checks) == (0, "warn", False)
            assert checks["invariants"] in ("ok", "warn")
            assert [p for p in saver.check_invariants() if not p.stale] == []
            thread_keys = [k for k in client.scan_iter(match="ev:*") if b"{" in k]
            assert [k for k in thread_keys if client.pttl(k) == -1] == []
    finally:
        server.kill()


def test_the_eviction_log_holds_every_key_evicted_until_its_stop(tmp_path: Path) -> None:
    # a limit set below what the server holds: it evicts in the background, a few keys a pass
    # (maxmemory-eviction-tenacity 0), still at it when the log stops
    config = {"maxmemory-policy": "allkeys-random", "maxmemory-eviction-tenacity": "0"}
    server = PrivateServer(tmp_path, **config).start()
    try:
        client = redis.Redis.from_url(server.url)
        keys = [f"k{i}" for i in range(20_000)]
        client.mset(dict.fromkeys(keys, b"x" * 100))
        log = EvictionLog(client)
        client.config_set("maxmemory", str(client.info("memory")["used_memory"] // 2))
        evicted = log.stop()
        assert evicted and len(set(evicted)) == len(evicted)
        left = {k.decode() for k in client.scan_iter(count=1000)}
        assert sorted(evicted) == sorted(set(keys) - left)
        time.sleep(0.2)  # (and the server evicts no more)
        assert client.dbsize() == len(left)
    finally:
        server.kill()


def test_a_thread_that_lost_its_root_says_so_and_its_delete_reaps_the_rest(
    saver: RedisSaver, client: redis.Redis
) -> None:
    keys = KeySchema(saver.prefix)
    tag = keys.tag("t")
    graph = build_chat(saver)
    graph.invoke({"messages": [HumanMessage("hello", id="h")]}, cfg("t"))
    assert client.unlink(keys.thread(tag)) == 1  # as an eviction would
    with pytest.raises(CheckpointLostError) as lost:
        saver.get_tuple(cfg("t"))
    assert (lost.value.thread_id, lost.value.what, lost.value.key) == (
        "t",
        "thread root",
        keys.thread(tag),
    )
    with pytest.raises(CheckpointLostError):
        list(saver.list(cfg("t")))
    saver.delete_thread("t")
    assert list(client.scan_iter(match=keys.thread_keys_pattern("t"))) == []
    assert saver.get_tuple(cfg("t")) is None


def test_a_thread_that_lost_its_index_says_so(saver: RedisSaver, client: redis.Redis) -> None:
    keys = KeySchema(saver.prefix)
    tag = keys.tag("t")
    graph = build_chat(saver)
    graph.invoke({"messages": [HumanMessage("hello", id="h")]}, cfg("t"))
    assert client.unlink(keys.index(tag, "")) == 1  # as an eviction would
    with pytest.raises(CheckpointLostError) as lost:
        graph.get_state(cfg("t"))
    assert (lost.value.what, lost.value.key) == ("checkpoint index", keys.index(tag, ""))
    with pytest.raises(CheckpointLostError) as listed:
        list(saver.list(cfg("t")))
    assert (listed.value.what, listed.value.key) == ("checkpoint index", keys.index(tag, ""))
    # a thread that never existed is still None, at the cost of the reads that find nothing
    assert saver.get_tuple(cfg("never")) is None


def policy_warning(policy: str, keys_expire: bool) -> str:
    """The saver's warning of a server whose policy can evict its keys, word for word."""
    return (
        f"{eviction_risk(policy, keys_expire)}: under memory pressure the server drops keys of "
        f"threads, whose reads then fail with CheckpointLostError; {FIX}"
    )


def fall_back_warning(thread: str, key: str, lost_id: str, returned_id: str) -> str:
    return (
        f"thread {thread!r} lost a value ({key}) of its latest checkpoint {lost_id} in "
        "namespace '', most likely to the server's eviction; on_lost_checkpoint='fall_back' "
        f"returned the newest complete checkpoint, {returned_id}, and the turns after it are "
        f"lost; to prevent it {FIX}"
    )


@pytest.mark.parametrize("use_async", [False, True])
def test_fall_back_returns_the_newest_complete_checkpoint_with_a_warning(
    server_url: str,
    prefix: str,
    client: redis.Redis,
    use_async: bool,
    caplog: pytest.LogCaptureFixture,
) -> None:
    keys = KeySchema(prefix)
    with RedisSaver(server_url, prefix=prefix, on_lost_checkpoint="fall_back") as saver:
        graph = build_chat(saver)
        for turn in range(2):
            graph.invoke({"messages": [HumanMessage(f"hi {turn}", id=f"h{turn}")]}, cfg("t"))
        history = list(saver.list(cfg("t")))
        newest, complete = history[0], history[1]
        versions = newest.checkpoint["channel_versions"]
        blob = keys.blob(keys.tag("t"), "", "messages", versions["messages"])
        assert complete.checkpoint["channel_versions"]["messages"] != versions["messages"]
        assert client.unlink(blob) == 1  # as an eviction would
        newest_id = newest.config["configurable"]["checkpoint_id"]
        with caplog.at_level(logging.WARNING, logger="langgraph.checkpoint.rediskv.eviction"):
            if use_async:

                async def read() -> Any:
                    async with AsyncRedisSaver.from_conn_string(
                        server_url, prefix=prefix, on_lost_checkpoint="fall_back"
                    ) as asaver:
                        return await asaver.aget_tuple(cfg("t"))

                got = asyncio.run(read())
            else:
                got = saver.get_tuple(cfg("t"))
        assert got is not None
        assert (got.config, got.checkpoint, got.metadata) == (
            complete.config,
            complete.checkpoint,
            complete.metadata,
        )
        assert [(r.levelno, r.getMessage()) for r in caplog.records] == [
            (
                logging.WARNING,
                fall_back_warning(
                    "t", blob, newest_id, complete.config["configurable"]["checkpoint_id"]
                ),
            )
        ]
        # by its id, the lost checkpoint still raises; so does the default saver
        with pytest.raises(CheckpointLostError):
            saver.get_tuple(
                {
                    "configurable": {
                        "thread_id": "t",
                        "checkpoint_ns": "",
                        "checkpoint_id": newest_id,
                    }
                }
            )
    with RedisSaver(server_url, prefix=prefix) as default:
        with pytest.raises(CheckpointLostError) as lost:
            default.get_tuple(cfg("t"))
        assert (lost.value.what, lost.value.key) == ("value", blob)


def test_fall_back_raises_when_no_checkpoint_is_complete(
    server_url: str, prefix: str, client: redis.Redis
) -> None:
    keys = KeySchema(prefix)
    with RedisSaver(server_url, prefix=prefix, on_lost_checkpoint="fall_back") as saver:
        graph = build_chat(saver)
        graph.invoke({"messages": [HumanMessage("hi", id="h")]}, cfg("t"))
        blobs = list(client.scan_iter(match=keys.thread_keys_pattern("t")))
        values = [b for b in blobs if b":blob:" in b]  # (every checkpoint has one)
        assert values and client.unlink(*values) == len(values)
        with pytest.raises(CheckpointLostError) as lost:
            saver.get_tuple(cfg("t"))
        assert lost.value.what == "value"


def test_a_shallow_saver_with_fall_back_raises_as_no_older_checkpoint_is_left(
    server_url: str, prefix: str, client: redis.Redis
) -> None:
    keys = KeySchema(prefix)
    with ShallowRedisSaver(server_url, prefix=prefix, on_lost_checkpoint="fall_back") as saver:
        graph = build_chat(saver)
        for turn in range(2):
            graph.invoke({"messages": [HumanMessage(f"hi {turn}", id=f"h{turn}")]}, cfg("t"))
        latest = saver.get_tuple(cfg("t"))
        assert latest is not None
        version = latest.checkpoint["channel_versions"]["messages"]
        blob = keys.blob(keys.tag("t"), "", "messages", version)
        assert client.unlink(blob) == 1  # as an eviction would
        with pytest.raises(CheckpointLostError) as lost:
            saver.get_tuple(cfg("t"))
        assert (lost.value.what, lost.value.key) == ("value", blob)


def test_on_lost_checkpoint_is_checked() -> None:
    with pytest.raises(ValueError, match="invalid on_lost_checkpoint 'fallback'"):
        RedisSaver("redis://127.0.0.1:1/0", on_lost_checkpoint="fallback")


def doctor(url: str, prefix: str, *options: str) -> tuple[int, dict[str, str]]:
    command = ["-m", "langgraph.checkpoint.rediskv", "--url", url, "--prefix", prefix]
    done = subprocess.run(
        [sys.executable, *command, "doctor", "--json", *options],
        capture_output=True,
        text=True,
        timeout=120,
    )
    report = json.loads(done.stdout)
    return done.returncode, {c["check"]: c["status"] for c in report["checks"]}


@pytest.mark.parametrize(
    ("policy", "with_ttl", "status"),
    [
        ("noeviction", True, "ok"),
        ("volatile-lru", False, "ok"),
        ("volatile-lru", True, "fail"),
        ("volatile-ttl", True, "fail"),
        ("allkeys-lru", False, "fail"),
        ("allkeys-random", False, "fail"),
    ],
)
def test_doctor_fails_on_a_policy_that_evicts_the_savers_keys(
    tmp_path: Path, policy: str, with_ttl: bool, status: str, caplog: pytest.LogCaptureFixture
) -> None:
    server = PrivateServer(tmp_path, maxmemory="64mb", **{"maxmemory-policy": policy}).start()
    try:
        with (
            caplog.at_level(logging.WARNING, logger="langgraph.checkpoint.rediskv.eviction"),
            RedisSaver(server.url, prefix="doc", ttl=TTL if with_ttl else None) as saver,
        ):
            graph = build_chat(saver)
            for turn in range(2):
                graph.invoke({"messages": [HumanMessage("hi", id=f"h{turn}")]}, cfg("t"))
        # the saver's warning, once, at its first call
        warnings = [r.getMessage() for r in caplog.records]
        assert len(warnings) == (status == "fail")
        if warnings:
            assert warnings[0].startswith(f"maxmemory-policy {policy} evicts")
        code, checks = doctor(server.url, "doc")
        assert checks["maxmemory-policy"] == status
        assert code == (2 if status == "fail" else 0)
    finally:
        server.kill()


@pytest.mark.parametrize(
    ("policy", "warned"),
    [
        ("noeviction", []),
        # no key expires until set_thread_ttl: its first call warns, once
        ("volatile-lru", [("set_thread_ttl", policy_warning("volatile-lru", True))]),
        # (warned at the first call already)
        ("allkeys-lru", [("first call", policy_warning("allkeys-lru", False))]),
    ],
)
@pytest.mark.parametrize("use_async", [False, True])
def test_set_thread_ttl_without_a_default_ttl_warns_once_of_a_volatile_policy(
    tmp_path: Path,
    policy: str,
    warned: list[tuple[str, str]],
    use_async: bool,
    caplog: pytest.LogCaptureFixture,
) -> None:
    server = PrivateServer(tmp_path, maxmemory="64mb", **{"maxmemory-policy": policy}).start()
    seen: list[tuple[str, str]] = []

    def note(when: str) -> None:
        seen.extend((when, r.getMessage()) for r in caplog.records)
        caplog.clear()

    async def calls_async() -> None:
        async with AsyncRedisSaver.from_conn_string(server.url, prefix="st") as saver:
            await saver.aget_tuple(cfg("t"))
            note("first call")
            for thread in ("t", "u"):
                await saver.aset_thread_ttl(thread, 5)
                note("set_thread_ttl")

    try:
        with caplog.at_level(logging.WARNING, logger="langgraph.checkpoint.rediskv.eviction"):
            if use_async:
                asyncio.run(calls_async())
            else:
                with RedisSaver(server.url, prefix="st") as saver:
                    saver.get_tuple(cfg("t"))
                    note("first call")
                    for thread in ("t", "u"):
                        saver.set_thread_ttl(thread, 5)
                        note("set_thread_ttl")
        assert seen == warned
    finally:
        server.kill()


def test_doctor_repair_removes_the_blobs_of_an_evicted_record(
    saver: RedisSaver, client: redis.Redis, server_url: str
) -> None:
    keys = KeySchema(saver.prefix)
    graph = build_chat(saver)
    graph.invoke({"messages": [HumanMessage(random_text(), id="h")]}, cfg("t"))
    newest = saver.get_tuple(cfg("t"))
    assert newest is not None
    tag, versions = keys.tag("t"), newest.checkpoint["channel_versions"]
    record = keys.checkpoint(tag, "", newest.config["configurable"]["checkpoint_id"])
    blob = keys.blob(tag, "", "messages", versions["messages"])
    assert client.unlink(record) == 1  # as an eviction would: its blob is led to by nothing
    assert ("key not reachable from any index", blob) in {
        (p.problem, p.key) for p in saver.check_invariants()
    }
    code, checks = doctor(server_url, saver.prefix, "--repair")
    assert (code, checks["repair"], checks["invariants"]) == (0, "info", "warn")
    assert client.exists(blob) == 0
    assert [p for p in saver.check_invariants() if not p.stale] == []


def test_reindex_and_doctor_repair_write_again_the_index_entries_an_eviction_took(
    saver: RedisSaver, client: redis.Redis, server_url: str
) -> None:
    keys = KeySchema(saver.prefix)
    tag = keys.tag("t")
    graph = build_chat(saver)
    graph.invoke({"messages": [HumanMessage("hi", id="h")]}, cfg("t"))
    source = keys.threads_with(metadata_index_suffix("source", '"loop"'))
    lost = "threads-by-value index missing from the thread's values"
    # the thread's own threads-by-value set, then also a threads-by-value index, as evictions
    for evicted, problem in [
        ([keys.thread_values(tag)], lost),
        ([keys.thread_values(tag), source], "thread missing from a threads-by-value index"),
    ]:
        assert client.unlink(*evicted) == len(evicted)
        assert problem in {p.problem for p in saver.check_invariants()}
        assert saver.reindex_metadata() > 0
        assert saver.check_invariants() == []
        assert saver.reindex_metadata() == 0  # (nothing left to write)
    suffix = metadata_index_suffix("source", '"loop"')
    assert client.sismember(keys.thread_values(tag), suffix) == 1
    # doctor --repair does the same
    assert client.unlink(keys.thread_values(tag)) == 1
    code, checks = doctor(server_url, saver.prefix, "--repair")
    assert (code, checks["reindex"], checks["invariants"]) == (0, "info", "ok")
    assert saver.check_invariants() == []


# -- no false alarms: a thread that lost nothing never raises CheckpointLostError ------------
# A namespace may hold pending writes before its first checkpoint (LangGraph stores a task's
# writes as they come): such a namespace has no index, and neither does one the thread never
# had. Each sequence below is legal, evicts nothing, and reads back exactly.

SUB = "sub:1"


def ns_cfg(ns: str, checkpoint_id: str | None = None) -> Any:
    configurable = {"thread_id": "t", "checkpoint_ns": ns}
    if checkpoint_id:
        configurable["checkpoint_id"] = checkpoint_id
    return {"configurable": configurable}


def stored_checkpoint(checkpoint_id: str, n: int) -> Checkpoint:
    checkpoint = empty_checkpoint()
    checkpoint["id"] = checkpoint_id
    checkpoint["channel_values"] = {"x": n}
    checkpoint["channel_versions"] = {"x": str(n)}
    return checkpoint


# steps: ("put", ns, n, run id): checkpoint n (ids ascend with n), its parent n - 1 when that
# was put in ns; ("writes", ns, n): a pending write against checkpoint n's id in ns (n may be
# put in another namespace, or nowhere); ("delete_for_runs", run id); ("prune",)
SEQUENCES: dict[str, tuple[list[tuple[Any, ...]], dict[str, int | None], list[int]]] = {
    # (steps, the checkpoint get_tuple gives per namespace, the ids list gives, newest first)
    "writes only in a subgraph after the graph's checkpoint": (
        [("put", "", 2, "runB"), ("writes", SUB, 1)],
        {"": 2, SUB: None},
        [2],
    ),
    "writes only in a subgraph before the graph's checkpoint": (
        [("writes", SUB, 1), ("put", "", 2, "runB")],
        {"": 2, SUB: None},
        [2],
    ),
    "writes only in a subgraph, against the graph's checkpoint": (
        [("put", "", 1, "runA"), ("writes", SUB, 1)],
        {"": 1, SUB: None},
        [1],
    ),
    "writes only in the graph's namespace after a subgraph's checkpoint": (
        [("put", SUB, 2, "runB"), ("writes", "", 1)],
        {"": None, SUB: 2},
        [2],
    ),
    "writes only in the graph's namespace before a subgraph's checkpoint": (
        [("writes", "", 1), ("put", SUB, 2, "runB")],
        {"": None, SUB: 2},
        [2],
    ),
    "checkpoints only in a subgraph": (
        [("put", SUB, 1, "runA"), ("put", SUB, 2, "runA")],
        {"": None, SUB: 2, "sub:9": None},
        [2, 1],
    ),
    "a namespace the thread never had": (
        [("put", "", 1, "runA"), ("writes", "", 1)],
        {"": 1, SUB: None, "sub:9": None},
        [1],
    ),
    "writes only in both namespaces": (
        [("writes", "", 1), ("writes", SUB, 2)],
        {"": None, SUB: None},
        [],
    ),
    "delete_for_runs took a namespace's checkpoints, not its writes stored before them": (
        [
            ("put", "", 1, "runA"),
            ("writes", "", 3),
            ("put", SUB, 2, "runB"),
            ("delete_for_runs", "runA"),
        ],
        {"": None, SUB: 2},
        [2],
    ),
    "delete_for_runs took every checkpoint, a subgraph holds only writes": (
        [
            ("put", "", 1, "runA"),
            ("put", "", 2, "runA"),
            ("writes", SUB, 3),
            ("delete_for_runs", "runA"),
        ],
        {"": None, SUB: None},
        [],
    ),
    "delete_for_runs took the subgraph's checkpoints, the graph holds only writes": (
        [
            ("writes", "", 3),
            ("put", SUB, 1, "runA"),
            ("put", SUB, 2, "runB"),
            ("delete_for_runs", "runA"),
            ("delete_for_runs", "runB"),
        ],
        {"": None, SUB: None},
        [],
    ),
    "prune beside a namespace that holds only writes": (
        [("put", "", 1, "runA"), ("put", "", 2, "runA"), ("writes", SUB, 3), ("prune",)],
        {"": 2, SUB: None},
        [2],
    ),
    "prune of a subgraph's checkpoints beside the graph's writes": (
        [("writes", "", 3), ("put", SUB, 1, "runA"), ("put", SUB, 2, "runA"), ("prune",)],
        {"": None, SUB: 2},
        [2],
    ),
}


@pytest.mark.parametrize("sequence", list(SEQUENCES))
def test_no_false_alarm_on_a_namespace_without_checkpoints(
    saver: RedisSaver, sequence: str
) -> None:
    steps, latest, listed = SEQUENCES[sequence]
    ids = sorted(str(uuid6(clock_seq=-1)) for _ in range(4))
    put_in: dict[int, str] = {}
    for step in steps:
        if step[0] == "put":
            _, ns, n, run = step
            parent = ids[n - 1] if put_in.get(n - 1) == ns else None
            metadata = {"source": "loop", "step": n, "run_id": run}
            saver.put(ns_cfg(ns, parent), stored_checkpoint(ids[n], n), metadata, {"x": str(n)})
            put_in[n] = ns
        elif step[0] == "writes":
            _, ns, n = step
            saver.put_writes(ns_cfg(ns, ids[n]), [("x", n)], f"task-{ns}-{n}")
        elif step[0] == "delete_for_runs":
            saver.delete_for_runs([step[1]])
        else:
            saver.prune(["t"])
    got: dict[str, int | None] = {}
    for ns in latest:
        found = saver.get_tuple(ns_cfg(ns))
        got[ns] = None if found is None else ids.index(found.checkpoint["id"])
    assert got == latest
    assert [ids.index(t.checkpoint["id"]) for t in saver.list(cfg("t"))] == listed
    for ns, n in latest.items():
        in_ns = [ids.index(t.checkpoint["id"]) for t in saver.list(ns_cfg(ns))]
        assert in_ns == [i for i in listed if put_in.get(i) == ns]
        assert in_ns[:1] == ([] if n is None else [n])


def test_a_subgraph_namespace_that_lost_its_index_says_so(
    saver: RedisSaver, client: redis.Redis
) -> None:
    keys = KeySchema(saver.prefix)
    ids = sorted(str(uuid6(clock_seq=-1)) for _ in range(2))
    saver.put(ns_cfg(""), stored_checkpoint(ids[0], 0), {"run_id": "runA"}, {"x": "0"})
    saver.put(ns_cfg(SUB), stored_checkpoint(ids[1], 1), {"run_id": "runA"}, {"x": "1"})
    saver.put_writes(ns_cfg(SUB, ids[1]), [("x", 2)], "task")
    assert client.unlink(keys.index(keys.tag("t"), SUB)) == 1  # as an eviction would
    with pytest.raises(CheckpointLostError) as lost:
        saver.get_tuple(ns_cfg(SUB))
    assert (lost.value.what, lost.value.key) == ("checkpoint index", keys.index(keys.tag("t"), SUB))
    with pytest.raises(CheckpointLostError):
        list(saver.list(cfg("t")))


def test_a_namespace_that_lost_its_index_and_records_but_not_their_writes_says_so(
    saver: RedisSaver, client: redis.Redis
) -> None:
    # writes stored before their checkpoint (in a hash of their own), then the index and the
    # records evicted: the thread's runs, of this namespace alone, say it had checkpoints
    keys = KeySchema(saver.prefix)
    tag = keys.tag("t")
    ids = sorted(str(uuid6(clock_seq=-1)) for _ in range(2))
    saver.put(ns_cfg(""), stored_checkpoint(ids[0], 0), {"run_id": "runA"}, {"x": "0"})
    saver.put_writes(ns_cfg("", ids[1]), [("x", 1)], "task")
    saver.put(ns_cfg("", ids[0]), stored_checkpoint(ids[1], 1), {"run_id": "runA"}, {"x": "1"})
    evicted = [
        keys.index(tag, ""),
        keys.checkpoint(tag, "", ids[0]),
        keys.checkpoint(tag, "", ids[1]),
    ]
    assert client.unlink(*evicted) == 3
    assert client.exists(keys.writes(tag, "", ids[1])) == 1
    with pytest.raises(CheckpointLostError) as lost:
        saver.get_tuple(ns_cfg(""))
    assert (lost.value.what, lost.value.key) == ("checkpoint index", keys.index(tag, ""))
