"""A server that evicts under memory pressure (issue 31): chats through real graphs on a private
server with a small maxmemory until it evicts keys of the saver; then every read of a thread
is exact or CheckpointLostError (never an empty or shorter state taken for the whole thread),
a delete of each broken thread leaves nothing of it that does not expire."""

from __future__ import annotations

import base64
import os
from pathlib import Path
from typing import Any

import pytest
import redis
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.graph import END, START, MessagesState, StateGraph

from langgraph.checkpoint.rediskv import CheckpointLostError, RedisSaver
from langgraph.checkpoint.rediskv.check import ORPHAN
from langgraph.checkpoint.rediskv.keys import KeySchema

from .conftest import PrivateServer

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


def run_chats(saver: RedisSaver) -> dict[str, list[str]]:
    """CHATS chats of TURNS turns, one turn of each at a time; what each chat holds after its
    last turn that went through (a turn whose first read finds the thread broken fails)."""
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
            written[thread] = [m.content for m in state["messages"]]
    return written


def leads_to(client: redis.Redis, keys: KeySchema, thread: str) -> int:
    """How many of the keys that lead to a thread's checkpoints are left: its root, its
    index and writes index, its runs and its values."""
    tag = keys.tag(thread)
    return int(
        client.exists(
            keys.thread(tag),
            keys.index(tag, ""),
            keys.writes_index(tag, ""),
            keys.runs(tag),
            keys.thread_values(tag),
        )
    )


def read_all(
    saver: RedisSaver, client: redis.Redis, written: dict[str, list[str]]
) -> dict[str, str]:
    """Each chat read back as the app does (its state, then its history): "exact"; "lost"
    when a read raised CheckpointLostError naming it; "gone" when it reads as a thread that
    never existed, only where eviction took every key that leads to its checkpoints (no read
    can tell such a thread from a new one). Anything else fails."""
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
            assert (history, leads_to(client, keys, thread)) == ([], 0)
            outcome[thread] = "gone"
            continue
        assert [m.content for m in state.values["messages"]] == messages
        assert history[0].config == state.config
        # every step of the history holds exactly the messages of its time (never a mix)
        held = [len(step.values.get("messages", [])) for step in history]
        for step, count in zip(history, held, strict=True):
            assert [m.content for m in step.values.get("messages", [])] == messages[:count]
        # each turn wrote three steps: its input (the messages before it), the human's
        # message, the bot's; a history without one of them lost a whole record, which is
        # taken for one that expired (see the README's "Eviction")
        whole = [2 * t - k for t in range(len(messages) // 2, 0, -1) for k in range(3)]
        outcome[thread] = "exact" if held == whole else "holes"
    return outcome


@pytest.mark.parametrize("policy", ["volatile-lru", "allkeys-lru", "volatile-ttl"])
def test_an_evicting_server_never_makes_a_thread_silently_empty(
    tmp_path: Path, policy: str
) -> None:
    server = PrivateServer(tmp_path, maxmemory="3mb", **{"maxmemory-policy": policy}).start()
    try:
        client = redis.Redis.from_url(server.url)
        with RedisSaver(server.url, prefix="ev", ttl=TTL) as saver:
            written = run_chats(saver)
            assert client.info("stats")["evicted_keys"] > 0
            client.config_set("maxmemory", "0")  # what follows reads, deletes and checks
            outcome = read_all(saver, client, written)
            kinds = ("exact", "holes", "lost", "gone")
            assert set(outcome.values()) <= set(kinds)
            counts = {o: list(outcome.values()).count(o) for o in kinds}
            print(f"{policy}: {counts}")  # (the figures of the README: pytest -s)
            lost = sorted(t for t, o in outcome.items() if o in ("lost", "gone"))
            for thread in lost:
                saver.delete_thread(thread)
                assert saver.get_tuple(cfg(thread)) is None
                assert list(saver.list(cfg(thread))) == []
            # what is left of threads broken beyond recognition (every key that leads to
            # their checkpoints evicted) expires: no key of the prefix lives forever
            problems = saver.check_invariants()
            assert [p for p in problems if p.problem == ORPHAN] == []
            thread_keys = [k for k in client.scan_iter(match="ev:*") if b"{" in k]
            assert [k for k in thread_keys if client.pttl(k) == -1] == []
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
    # a thread that never existed is still None, at the cost of the reads that find nothing
    assert saver.get_tuple(cfg("never")) is None
