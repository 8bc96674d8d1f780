"""Real LangGraph graphs (deterministic nodes, no LLM) checkpointed by the savers.

Every scenario runs twice through the ``driver`` fixture: ``sync`` drives the graph with
``invoke`` / ``get_state`` / ... on a :class:`RedisSaver`, ``async`` with ``ainvoke`` /
``aget_state`` / ... on an :class:`AsyncRedisSaver`. The graph builders below are shared by
both forms; each scenario asserts exact values (states, histories, call counts, keys).
"""

from __future__ import annotations

import asyncio
import hashlib
import operator
import random
import sys
import threading
import time
from collections import Counter
from collections.abc import AsyncIterator, Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Annotated, Any, TypedDict

import pytest
import redis
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.runnables.config import var_child_runnable_config
from langgraph.checkpoint.base import BaseCheckpointSaver, CheckpointTuple
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.types import Command, StateSnapshot, interrupt

from langgraph.checkpoint.rediskv import AsyncRedisSaver, RedisSaver
from langgraph.checkpoint.rediskv.keys import KeySchema

from ..conftest import keys_of, snapshot, without_base_mark

Saver = RedisSaver | AsyncRedisSaver
Graph = Any  # a compiled StateGraph


def interrupt_node(value: Any, config: RunnableConfig) -> Any:
    """``interrupt(value)`` from a node that was handed its ``config``. interrupt() reads the
    node's config from a context variable, which asyncio carries into LangGraph's tasks only
    from Python 3.11 on (LangGraph's documented limit for async runs); on 3.10 an async run
    reaches the node without it, so the node sets it from its ``config`` argument."""
    if sys.version_info >= (3, 11):
        return interrupt(value)
    token = var_child_runnable_config.set(config)
    try:
        return interrupt(value)
    finally:
        var_child_runnable_config.reset(token)


# -- drivers: one scenario, two ways of running it ---------------------------------------------
class Driver:
    """Runs graphs on one kind of saver; ``open_saver`` makes more saver objects on the same
    url and prefix (a "brand-new saver instance", as after a process restart)."""

    mode = ""

    def __init__(self, url: str, prefix: str, options: dict[str, Any] | None = None) -> None:
        self.url, self.prefix, self.options = url, prefix, options or {}
        self._opened: list[Saver] = []
        self.saver = self.open_saver()

    def open_saver(self) -> Saver:
        raise NotImplementedError

    async def close(self) -> None:
        raise NotImplementedError

    async def invoke(self, graph: Graph, value: Any, config: RunnableConfig) -> Any:
        raise NotImplementedError

    async def get_state(
        self, graph: Graph, config: RunnableConfig, *, subgraphs: bool = False
    ) -> StateSnapshot:
        raise NotImplementedError

    async def history(self, graph: Graph, config: RunnableConfig) -> list[StateSnapshot]:
        raise NotImplementedError

    async def update_state(
        self, graph: Graph, config: RunnableConfig, values: Any, as_node: str
    ) -> RunnableConfig:
        raise NotImplementedError

    async def checkpoints(self, config: RunnableConfig) -> list[CheckpointTuple]:
        """``saver.list(config)`` of the driver's first saver."""
        raise NotImplementedError

    async def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        raise NotImplementedError

    async def delete_thread(self, thread_id: str) -> None:
        raise NotImplementedError


class SyncDriver(Driver):
    mode = "sync"
    saver: RedisSaver

    def open_saver(self) -> RedisSaver:
        saver = RedisSaver(self.url, prefix=self.prefix, **self.options)
        self._opened.append(saver)
        return saver

    async def close(self) -> None:
        for saver in self._opened:
            assert isinstance(saver, RedisSaver)
            saver.close()

    async def invoke(self, graph: Graph, value: Any, config: RunnableConfig) -> Any:
        return graph.invoke(value, config)

    async def get_state(
        self, graph: Graph, config: RunnableConfig, *, subgraphs: bool = False
    ) -> StateSnapshot:
        return graph.get_state(config, subgraphs=subgraphs)  # type: ignore[no-any-return]

    async def history(self, graph: Graph, config: RunnableConfig) -> list[StateSnapshot]:
        return list(graph.get_state_history(config))

    async def update_state(
        self, graph: Graph, config: RunnableConfig, values: Any, as_node: str
    ) -> RunnableConfig:
        return graph.update_state(config, values, as_node=as_node)  # type: ignore[no-any-return]

    async def checkpoints(self, config: RunnableConfig) -> list[CheckpointTuple]:
        return list(self.saver.list(config))

    async def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        return self.saver.get_tuple(config)

    async def delete_thread(self, thread_id: str) -> None:
        self.saver.delete_thread(thread_id)


class AsyncDriver(Driver):
    mode = "async"
    saver: AsyncRedisSaver

    def open_saver(self) -> AsyncRedisSaver:
        saver = AsyncRedisSaver(self.url, prefix=self.prefix, **self.options)
        self._opened.append(saver)
        return saver

    async def close(self) -> None:
        for saver in self._opened:
            assert isinstance(saver, AsyncRedisSaver)
            await saver.aclose()

    async def invoke(self, graph: Graph, value: Any, config: RunnableConfig) -> Any:
        return await graph.ainvoke(value, config)

    async def get_state(
        self, graph: Graph, config: RunnableConfig, *, subgraphs: bool = False
    ) -> StateSnapshot:
        return await graph.aget_state(config, subgraphs=subgraphs)  # type: ignore[no-any-return]

    async def history(self, graph: Graph, config: RunnableConfig) -> list[StateSnapshot]:
        return [snapshot async for snapshot in graph.aget_state_history(config)]

    async def update_state(
        self, graph: Graph, config: RunnableConfig, values: Any, as_node: str
    ) -> RunnableConfig:
        return await graph.aupdate_state(config, values, as_node=as_node)  # type: ignore[no-any-return]

    async def checkpoints(self, config: RunnableConfig) -> list[CheckpointTuple]:
        return [t async for t in self.saver.alist(config)]

    async def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        return await self.saver.aget_tuple(config)

    async def delete_thread(self, thread_id: str) -> None:
        await self.saver.adelete_thread(thread_id)


@pytest.fixture(params=[SyncDriver, AsyncDriver], ids=["sync", "async"])
async def driver(
    request: pytest.FixtureRequest, server_url: str, prefix: str, saver_options: dict[str, Any]
) -> AsyncIterator[Driver]:
    d: Driver = request.param(server_url, prefix, saver_options)
    try:
        yield d
    finally:
        await d.close()


def thread_config(thread_id: str, **extra: Any) -> RunnableConfig:
    return {"configurable": {"thread_id": thread_id}, **extra}  # type: ignore[typeddict-item]


def history_rows(history: list[StateSnapshot]) -> list[tuple[int, str, tuple[str, ...], Any]]:
    """(step, source, next, values) of each snapshot: what a history is expected to be."""
    return [(s.metadata["step"], s.metadata["source"], s.next, s.values) for s in history]


class Calls:
    """Thread-safe count of node runs (sync nodes run in worker threads)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts: Counter[str] = Counter()

    def hit(self, node: str) -> None:
        with self._lock:
            self._counts[node] += 1

    def as_dict(self) -> dict[str, int]:
        with self._lock:
            return dict(self._counts)


# -- graphs ------------------------------------------------------------------------------------
def chat_graph(checkpointer: BaseCheckpointSaver[Any], calls: Calls) -> Graph:
    """START -> bot -> END; the bot echoes the last message."""

    def bot(state: MessagesState) -> dict[str, Any]:
        calls.hit("bot")
        last = state["messages"][-1]
        return {"messages": [AIMessage(content=f"echo: {last.content}", id=f"echo-{last.id}")]}

    builder = StateGraph(MessagesState)
    builder.add_node("bot", bot)
    builder.add_edge(START, "bot")
    builder.add_edge("bot", END)
    return builder.compile(checkpointer=checkpointer)


def human(thread: str, turn: int) -> HumanMessage:
    return HumanMessage(content=f"{thread} turn {turn}", id=f"{thread}-h{turn}")


def transcript(thread: str, turns: int) -> list[AnyMessage]:
    """The messages of a chat thread after ``turns`` complete turns."""
    messages: list[AnyMessage] = []
    for turn in range(turns):
        messages.append(human(thread, turn))
        messages.append(
            AIMessage(content=f"echo: {thread} turn {turn}", id=f"echo-{thread}-h{turn}")
        )
    return messages


async def chat(driver: Driver, graph: Graph, thread: str, turns: int) -> None:
    """Run ``turns`` turns on a thread, checking each turn's result exactly."""
    config = thread_config(thread)
    for turn in range(turns):
        result = await driver.invoke(graph, {"messages": [human(thread, turn)]}, config)
        assert result == {"messages": transcript(thread, turn + 1)}


class AskState(TypedDict, total=False):
    topic: str
    name: str
    greeting: str


def ask_graph(checkpointer: BaseCheckpointSaver[Any], calls: Calls) -> Graph:
    """START -> prepare -> ask (interrupts) -> greet -> END."""

    def prepare(state: AskState) -> AskState:
        calls.hit("prepare")
        return {"topic": state["topic"].upper()}

    def ask(state: AskState, config: RunnableConfig) -> AskState:
        calls.hit("ask")
        name = interrupt_node({"question": "what is your name?", "topic": state["topic"]}, config)
        return {"name": name}

    def greet(state: AskState) -> AskState:
        calls.hit("greet")
        return {"greeting": f"Hello, {state['name']}! ({state['topic']})"}

    builder = StateGraph(AskState)
    builder.add_node("prepare", prepare)
    builder.add_node("ask", ask)
    builder.add_node("greet", greet)
    builder.add_edge(START, "prepare")
    builder.add_edge("prepare", "ask")
    builder.add_edge("ask", "greet")
    builder.add_edge("greet", END)
    return builder.compile(checkpointer=checkpointer)


class LogState(TypedDict):
    log: Annotated[list[str], operator.add]


def fan_out_graph(
    checkpointer: BaseCheckpointSaver[Any],
    calls: Calls,
    failing: threading.Event,
    good_stored: Callable[[RunnableConfig], bool],
) -> Graph:
    """START -> (good, flaky) in one superstep -> join -> END. While ``failing`` is set,
    flaky waits until good's writes are stored (``good_stored``), then raises."""

    def good(state: LogState) -> LogState:
        calls.hit("good")
        return {"log": ["good"]}

    def flaky(state: LogState, config: RunnableConfig) -> LogState:
        calls.hit("flaky")
        if failing.is_set():
            deadline = time.monotonic() + 10
            while not good_stored(config):
                assert time.monotonic() < deadline, "good's writes were never stored"
                time.sleep(0.005)
            raise RuntimeError("flaky failed")
        return {"log": ["flaky"]}

    def join(state: LogState) -> LogState:
        calls.hit("join")
        return {"log": ["join"]}

    builder = StateGraph(LogState)
    builder.add_node("good", good)
    builder.add_node("flaky", flaky)
    builder.add_node("join", join)
    builder.add_edge(START, "good")
    builder.add_edge(START, "flaky")
    builder.add_edge(["good", "flaky"], "join")
    builder.add_edge("join", END)
    return builder.compile(checkpointer=checkpointer)


class ChildState(TypedDict):
    value: str
    steps: Annotated[list[str], operator.add]


class ParentState(TypedDict):
    value: str
    trail: Annotated[list[str], operator.add]


def nested_graph(checkpointer: BaseCheckpointSaver[Any], calls: Calls) -> Graph:
    """START -> before -> child -> after -> END, where child is a compiled subgraph
    sub_a -> sub_ask (interrupts) -> sub_b; only ``value`` is shared with the parent."""

    def sub_a(state: ChildState) -> ChildState:
        calls.hit("sub_a")
        return {"value": state["value"] + "|sub_a", "steps": ["sub_a"]}

    def sub_ask(state: ChildState, config: RunnableConfig) -> ChildState:
        calls.hit("sub_ask")
        answer = interrupt_node({"question": "continue?", "value": state["value"]}, config)
        return {"value": f"{state['value']}|{answer}", "steps": ["sub_ask"]}

    def sub_b(state: ChildState) -> ChildState:
        calls.hit("sub_b")
        return {"value": state["value"] + "|sub_b", "steps": ["sub_b"]}

    child = StateGraph(ChildState)
    child.add_node("sub_a", sub_a)
    child.add_node("sub_ask", sub_ask)
    child.add_node("sub_b", sub_b)
    child.add_edge(START, "sub_a")
    child.add_edge("sub_a", "sub_ask")
    child.add_edge("sub_ask", "sub_b")
    child.add_edge("sub_b", END)

    def before(state: ParentState) -> ParentState:
        calls.hit("before")
        return {"value": state["value"] + "|before", "trail": ["before"]}

    def after(state: ParentState) -> ParentState:
        calls.hit("after")
        return {"value": state["value"] + "|after", "trail": ["after"]}

    parent = StateGraph(ParentState)
    parent.add_node("before", before)
    parent.add_node("child", child.compile())
    parent.add_node("after", after)
    parent.add_edge(START, "before")
    parent.add_edge("before", "child")
    parent.add_edge("child", "after")
    parent.add_edge("after", END)
    return parent.compile(checkpointer=checkpointer)


class TrailState(TypedDict):
    trail: Annotated[list[str], operator.add]


def pipeline_graph(checkpointer: BaseCheckpointSaver[Any], calls: Calls) -> Graph:
    """START -> step_a -> step_b -> step_c -> END, each appending its letter."""
    builder = StateGraph(TrailState)
    previous = START
    for letter in "abc":

        def step(state: TrailState, letter: str = letter) -> TrailState:
            calls.hit(f"step_{letter}")
            return {"trail": [letter]}

        builder.add_node(f"step_{letter}", step)
        builder.add_edge(previous, f"step_{letter}")
        previous = f"step_{letter}"
    builder.add_edge(previous, END)
    return builder.compile(checkpointer=checkpointer)


class BlobState(TypedDict, total=False):
    payload: bytes
    parts: list[bytes]
    by_name: dict[str, bytes]
    reversed_payload: bytes
    digest: str


def blob_graph(checkpointer: BaseCheckpointSaver[Any]) -> Graph:
    """START -> store -> END; store writes a second 5 MB value and more raw bytes."""

    def store(state: BlobState) -> BlobState:
        return {
            "reversed_payload": state["payload"][::-1],
            "digest": hashlib.sha256(state["payload"]).hexdigest(),
            "parts": [*state["parts"], b"\x80node\x00"],
        }

    builder = StateGraph(BlobState)
    builder.add_node("store", store)
    builder.add_edge(START, "store")
    builder.add_edge("store", END)
    return builder.compile(checkpointer=checkpointer)


# -- 1. a long chat survives a new saver ---------------------------------------------------------
CHAT_TURNS = 50


def chat_history_rows(thread: str, turns: int) -> list[tuple[int, str, tuple[str, ...], Any]]:
    """Each turn writes 3 checkpoints: input (step 3t-1), before bot (3t), after bot (3t+1)."""
    rows = []
    for t in range(turns):
        before_input = {"messages": transcript(thread, t)}
        with_input = {"messages": [*transcript(thread, t), human(thread, t)]}
        rows.append((3 * t - 1, "input", ("__start__",), before_input))
        rows.append((3 * t, "loop", ("bot",), with_input))
        rows.append((3 * t + 1, "loop", (), {"messages": transcript(thread, t + 1)}))
    return rows[::-1]


async def test_chat_50_turns_survives_new_saver(driver: Driver) -> None:
    calls = Calls()
    graph = chat_graph(driver.saver, calls)
    config = thread_config("chat")
    await chat(driver, graph, "chat", CHAT_TURNS)
    assert calls.as_dict() == {"bot": CHAT_TURNS}
    history = await driver.history(graph, config)

    # a brand-new saver object on the same url and prefix sees the same thread
    reopened = chat_graph(driver.open_saver(), calls)
    state = await driver.get_state(reopened, config)
    assert state.values == {"messages": transcript("chat", CHAT_TURNS)}
    assert state.next == ()
    assert state.metadata["step"] == 3 * CHAT_TURNS - 2
    assert state.metadata["source"] == "loop"

    reopened_history = await driver.history(reopened, config)
    assert len(reopened_history) == 3 * CHAT_TURNS
    assert history_rows(reopened_history) == chat_history_rows("chat", CHAT_TURNS)
    assert reopened_history == history  # every field, as the first saver read it
    # one linear chain: each checkpoint's parent is the next older one
    ids = [s.config["configurable"]["checkpoint_id"] for s in reopened_history]
    parents = [s.parent_config["configurable"]["checkpoint_id"] for s in reopened_history[:-1]]
    assert parents == ids[1:]
    assert reopened_history[-1].parent_config is None
    assert ids == sorted(ids, reverse=True)

    # and the conversation goes on through the new saver
    result = await driver.invoke(reopened, {"messages": [human("chat", CHAT_TURNS)]}, config)
    assert result == {"messages": transcript("chat", CHAT_TURNS + 1)}
    assert calls.as_dict() == {"bot": CHAT_TURNS + 1}
    assert len(await driver.history(graph, config)) == 3 * (CHAT_TURNS + 1)


# -- 2. interrupt and resume ---------------------------------------------------------------------
async def test_interrupt_then_resume(driver: Driver) -> None:
    calls = Calls()
    graph = ask_graph(driver.saver, calls)
    config = thread_config("ask")
    question = {"question": "what is your name?", "topic": "REDIS"}

    result = await driver.invoke(graph, {"topic": "redis"}, config)
    assert set(result) == {"topic", "__interrupt__"}
    assert result["topic"] == "REDIS"
    assert [i.value for i in result["__interrupt__"]] == [question]
    assert calls.as_dict() == {"prepare": 1, "ask": 1}

    # the pending interrupt is stored: a new saver sees it
    reopened = ask_graph(driver.open_saver(), calls)
    state = await driver.get_state(reopened, config)
    assert state.values == {"topic": "REDIS"}
    assert state.next == ("ask",)
    assert [t.name for t in state.tasks] == ["ask"]
    assert [i.value for i in state.tasks[0].interrupts] == [question]
    assert [i.id for i in state.interrupts] == [i.id for i in result["__interrupt__"]]

    resumed = await driver.invoke(reopened, Command(resume="Ada"), config)
    assert resumed == {"topic": "REDIS", "name": "Ada", "greeting": "Hello, Ada! (REDIS)"}
    # ask ran again on resume (interrupt semantics); prepare did not
    assert calls.as_dict() == {"prepare": 1, "ask": 2, "greet": 1}
    final = await driver.get_state(graph, config)
    assert final.values == resumed
    assert final.next == ()
    assert final.tasks == ()


# -- 3. a failed superstep keeps the successful task's writes ------------------------------------
async def test_failed_superstep_resumes_without_rerunning_successful_node(
    driver: Driver, request: pytest.FixtureRequest
) -> None:
    calls = Calls()
    failing = threading.Event()
    failing.set()
    # flaky polls this (sync) saver from its worker thread until good's writes are stored
    checker = RedisSaver(driver.url, prefix=driver.prefix, **driver.options)
    request.addfinalizer(checker.close)

    def good_stored(config: RunnableConfig) -> bool:
        saved = checker.get_tuple(thread_config(config["configurable"]["thread_id"]))
        writes = [(channel, value) for _, channel, value in saved.pending_writes] if saved else []
        return ("log", ["good"]) in writes

    graph = fan_out_graph(driver.saver, calls, failing, good_stored)
    config = thread_config("fan-out")

    with pytest.raises(RuntimeError, match="flaky failed"):
        await driver.invoke(graph, {"log": ["start"]}, config)
    assert calls.as_dict() == {"good": 1, "flaky": 1}

    state = await driver.get_state(graph, config)
    assert state.values == {"log": ["start", "good"]}  # the current state shows good's output
    assert state.next == ("flaky",)
    assert state.metadata["step"] == 0
    tasks = {t.name: t for t in state.tasks}
    assert set(tasks) == {"good", "flaky"}
    assert tasks["good"].result == {"log": ["good"]}
    assert tasks["good"].error is None
    assert tasks["flaky"].error == "RuntimeError('flaky failed')"
    saved = await driver.get_tuple(config)
    assert saved is not None
    names = {t.id: t.name for t in state.tasks}
    assert sorted(
        (names[task_id], channel, value)
        for task_id, channel, value in saved.pending_writes
        if channel in ("log", "__error__")
    ) == [("flaky", "__error__", "RuntimeError('flaky failed')"), ("good", "log", ["good"])]

    failing.clear()
    result = await driver.invoke(graph, None, config)
    assert result == {"log": ["start", "flaky", "good", "join"]}
    assert calls.as_dict() == {"good": 1, "flaky": 2, "join": 1}  # good did not run again
    final = await driver.get_state(graph, config)
    assert final.values == result
    assert final.next == ()
    assert history_rows(await driver.history(graph, config)) == [
        (2, "loop", (), {"log": ["start", "flaky", "good", "join"]}),
        (1, "loop", ("join",), {"log": ["start", "flaky", "good"]}),
        (0, "loop", ("good", "flaky"), {"log": ["start"]}),
        (-1, "input", ("__start__",), {"log": []}),
    ]


# -- 4. subgraphs --------------------------------------------------------------------------------
async def test_subgraph_interrupt_and_namespaces(driver: Driver) -> None:
    calls = Calls()
    graph = nested_graph(driver.saver, calls)
    config = thread_config("nested")
    question = {"question": "continue?", "value": "start|before|sub_a"}

    result = await driver.invoke(graph, {"value": "start", "trail": ["start"]}, config)
    assert set(result) == {"value", "trail", "__interrupt__"}
    assert (result["value"], result["trail"]) == ("start|before", ["start", "before"])
    assert [i.value for i in result["__interrupt__"]] == [question]

    state = await driver.get_state(graph, config, subgraphs=True)
    assert state.values == {"value": "start|before", "trail": ["start", "before"]}
    assert state.next == ("child",)
    assert len(state.tasks) == 1
    task = state.tasks[0]
    assert task.name == "child"
    assert [i.value for i in task.interrupts] == [question]
    child_ns = f"child:{task.id}"
    sub = task.state
    assert isinstance(sub, StateSnapshot)
    assert sub.values == {"value": "start|before|sub_a", "steps": ["sub_a"]}
    assert sub.next == ("sub_ask",)
    assert sub.config["configurable"]["checkpoint_ns"] == child_ns
    assert sub.metadata["step"] == 1
    assert [i.value for i in sub.tasks[0].interrupts] == [question]
    direct = await driver.get_state(graph, sub.config)  # the subgraph checkpoint itself
    assert (direct.values, direct.next) == (sub.values, sub.next)
    assert (
        direct.config["configurable"]["checkpoint_id"]
        == sub.config["configurable"]["checkpoint_id"]
    )

    # checkpoints under both namespaces: list(config) without a namespace covers them all
    tuples = await driver.checkpoints(config)
    by_ns: dict[str, list[int]] = {}
    for t in tuples:
        assert t.config["configurable"]["thread_id"] == "nested"
        by_ns.setdefault(t.config["configurable"]["checkpoint_ns"], []).append(t.metadata["step"])
    assert by_ns == {"": [1, 0, -1], child_ns: [1, 0, -1]}
    child_tuples = await driver.checkpoints(
        {"configurable": {"thread_id": "nested", "checkpoint_ns": child_ns}}
    )
    assert [t.metadata["step"] for t in child_tuples] == [1, 0, -1]
    assert {t.config["configurable"]["checkpoint_ns"] for t in child_tuples} == {child_ns}
    assert child_tuples[0].checkpoint["channel_values"]["steps"] == ["sub_a"]

    resumed = await driver.invoke(graph, Command(resume="yes"), config)
    assert resumed == {
        "value": "start|before|sub_a|yes|sub_b|after",
        "trail": ["start", "before", "after"],
    }
    assert calls.as_dict() == {
        "before": 1,
        "sub_a": 1,
        "sub_ask": 2,
        "sub_b": 1,
        "after": 1,
    }
    final = await driver.get_state(graph, config, subgraphs=True)
    assert final.values == resumed
    assert (final.next, final.tasks) == ((), ())
    steps = [
        (t.config["configurable"]["checkpoint_ns"], t.metadata["step"])
        for t in await driver.checkpoints(config)
    ]
    assert sorted(steps) == sorted(
        [("", s) for s in (3, 2, 1, 0, -1)] + [(child_ns, s) for s in (3, 2, 1, 0, -1)]
    )


# -- 5. time travel ------------------------------------------------------------------------------
async def test_time_travel_replay_and_update_state_fork(driver: Driver) -> None:
    calls = Calls()
    graph = pipeline_graph(driver.saver, calls)
    config = thread_config("travel")

    assert await driver.invoke(graph, {"trail": ["start"]}, config) == {
        "trail": ["start", "a", "b", "c"]
    }
    original = await driver.history(graph, config)
    assert history_rows(original) == [
        (3, "loop", (), {"trail": ["start", "a", "b", "c"]}),
        (2, "loop", ("step_c",), {"trail": ["start", "a", "b"]}),
        (1, "loop", ("step_b",), {"trail": ["start", "a"]}),
        (0, "loop", ("step_a",), {"trail": ["start"]}),
        (-1, "input", ("__start__",), {"trail": []}),
    ]
    old = original[2]  # after step_a, before step_b
    old_id = old.config["configurable"]["checkpoint_id"]

    # replay from the old checkpoint: step_b and step_c run again on a new branch
    replayed = await driver.invoke(graph, None, old.config)
    assert replayed == {"trail": ["start", "a", "b", "c"]}
    assert calls.as_dict() == {"step_a": 1, "step_b": 2, "step_c": 2}

    # fork with update_state at the same checkpoint, then run the fork
    fork_config = await driver.update_state(graph, old.config, {"trail": ["edited"]}, "step_a")
    forked = await driver.get_state(graph, fork_config)
    assert forked.values == {"trail": ["start", "a", "edited"]}
    assert forked.next == ("step_b",)
    assert (forked.metadata["source"], forked.metadata["step"]) == ("update", 2)
    assert forked.parent_config is not None
    assert forked.parent_config["configurable"]["checkpoint_id"] == old_id
    result = await driver.invoke(graph, None, fork_config)
    assert result == {"trail": ["start", "a", "edited", "b", "c"]}
    assert calls.as_dict() == {"step_a": 1, "step_b": 3, "step_c": 3}
    latest = await driver.get_state(graph, config)
    assert latest.values == result

    after = await driver.history(graph, config)
    assert history_rows(after) == [
        (4, "loop", (), {"trail": ["start", "a", "edited", "b", "c"]}),
        (3, "loop", ("step_c",), {"trail": ["start", "a", "edited", "b"]}),
        (2, "update", ("step_b",), {"trail": ["start", "a", "edited"]}),
        (4, "loop", (), {"trail": ["start", "a", "b", "c"]}),
        (3, "loop", ("step_c",), {"trail": ["start", "a", "b"]}),
        (2, "fork", ("step_b",), {"trail": ["start", "a"]}),
        *history_rows(original),
    ]
    # the old branch is unchanged: each old checkpoint reads back exactly as before the forks
    assert after[6:] == original
    for state in original:
        assert await driver.get_state(graph, state.config) == state
    # both new branches hang off the old checkpoint
    new_roots = [s for s in after[:6] if s.metadata["step"] == 2]
    assert [s.parent_config["configurable"]["checkpoint_id"] for s in new_roots] == [old_id, old_id]


# -- 6. many threads at once ---------------------------------------------------------------------
async def test_50_threads_concurrently_async(
    server_url: str, prefix: str, saver_options: dict[str, Any]
) -> None:
    calls = Calls()
    turns = 3
    driver = AsyncDriver(server_url, prefix, saver_options)
    try:
        graph = chat_graph(driver.saver, calls)
        threads = [f"crowd-{i}" for i in range(50)]
        await asyncio.gather(*(chat(driver, graph, t, turns) for t in threads))
        assert calls.as_dict() == {"bot": 50 * turns}
        states = await asyncio.gather(*(driver.get_state(graph, thread_config(t)) for t in threads))
        for thread, state in zip(threads, states, strict=True):
            assert state.values == {"messages": transcript(thread, turns)}
            assert state.metadata["step"] == 3 * turns - 2
        histories = await asyncio.gather(
            *(driver.history(graph, thread_config(t)) for t in threads)
        )
        for thread, history in zip(threads, histories, strict=True):
            assert history_rows(history) == chat_history_rows(thread, turns)
    finally:
        await driver.close()


def test_threads_concurrently_sync(saver: RedisSaver) -> None:
    calls = Calls()
    turns = 3
    graph = chat_graph(saver, calls)
    threads = [f"pool-{i}" for i in range(16)]

    def run(thread: str) -> dict[str, Any]:
        config = thread_config(thread)
        result: dict[str, Any] = {}
        for turn in range(turns):
            result = graph.invoke({"messages": [human(thread, turn)]}, config)
        return result

    with ThreadPoolExecutor(max_workers=8) as pool:
        results = list(pool.map(run, threads))
    assert results == [{"messages": transcript(t, turns)} for t in threads]
    assert calls.as_dict() == {"bot": 16 * turns}
    for thread in threads:
        assert graph.get_state(thread_config(thread)).values == {
            "messages": transcript(thread, turns)
        }
        assert len(list(graph.get_state_history(thread_config(thread)))) == 3 * turns


# -- 7. big and binary values --------------------------------------------------------------------
async def test_5mb_value_and_raw_bytes_round_trip(driver: Driver, client: redis.Redis) -> None:
    payload = random.Random(20240607).randbytes(5 * 1024 * 1024)
    parts = [b"", b"\x00", b"\xff\xfe\xfd", bytes(range(256)), b"bytes\x00not text"]
    by_name = {"nul": b"\x00\x00", "bad-utf8": b"\xc3\x28", "empty": b""}
    expected = {
        "payload": payload,
        "parts": [*parts, b"\x80node\x00"],
        "by_name": by_name,
        "reversed_payload": payload[::-1],
        "digest": hashlib.sha256(payload).hexdigest(),
    }
    config = thread_config("blobs")
    graph = blob_graph(driver.saver)

    result = await driver.invoke(
        graph, {"payload": payload, "parts": parts, "by_name": by_name}, config
    )
    assert result == expected
    assert type(result["payload"]) is bytes
    assert all(type(p) is bytes for p in result["parts"])

    state = await driver.get_state(blob_graph(driver.open_saver()), config)
    assert state.values == expected
    assert all(type(v) is bytes for v in state.values["by_name"].values())

    # the channel values are stored as raw bytes (b"bytes\0" + value), not re-encoded (behind
    # the mark of a value that may serve as a base)
    pattern = f"{driver.prefix}:blob:{KeySchema.tag('blobs')}:*"
    digests = {
        hashlib.sha256(without_base_mark(client.get(k) or b"")).hexdigest()
        for k in keys_of(client, pattern)
    }
    assert hashlib.sha256(b"bytes\x00" + payload).hexdigest() in digests
    assert hashlib.sha256(b"bytes\x00" + payload[::-1]).hexdigest() in digests


# -- 8. delete_thread ----------------------------------------------------------------------------
async def test_delete_thread_removes_every_key_of_the_thread(
    driver: Driver, client: redis.Redis
) -> None:
    calls = Calls()
    graph = nested_graph(driver.saver, calls)
    keys = KeySchema(driver.prefix)
    # "user:10" would match a careless pattern for "user:1"
    victim = thread_config("user:1", metadata={"run_id": "run-victim"})
    survivor = thread_config("user:10", metadata={"run_id": "run-survivor"})
    start = {"value": "v", "trail": []}
    await driver.invoke(graph, start, victim)  # left interrupted: pending writes, 2 namespaces
    # and writes stored before their checkpoint (async durability may do that): their own hash
    ids = {"thread_id": "user:1", "checkpoint_ns": "", "checkpoint_id": "not stored yet"}
    await driver.saver.aput_writes({"configurable": ids}, [("value", "early")], "task")
    await driver.invoke(graph, start, survivor)
    survivor_result = await driver.invoke(graph, Command(resume="ok"), survivor)
    assert survivor_result == {
        "value": "v|before|sub_a|ok|sub_b|after",
        "trail": ["before", "after"],
    }

    victim_keys = keys_of(client, keys.thread_keys_pattern("user:1"))
    survivor_keys = keys_of(client, keys.thread_keys_pattern("user:10"))
    # every kind of key the thread can have (checkpoints, writes, blobs, indexes, run index)
    kinds = {k.split(":")[1] for k in victim_keys}
    assert kinds >= {"th", "idx", "cp", "w", "wi", "blob", "runs", "run"}
    assert not set(victim_keys) & set(survivor_keys)
    assert sorted(victim_keys + survivor_keys) == [
        k for k in keys_of(client, f"{driver.prefix}:*") if not keys.is_global(k)
    ]
    survivor_content = snapshot(client, keys.thread_keys_pattern("user:10"))

    await driver.delete_thread("user:1")

    assert keys_of(client, keys.thread_keys_pattern("user:1")) == []
    left = keys_of(client, f"{driver.prefix}:*")
    assert [k for k in left if not keys.is_global(k)] == survivor_keys
    # what is left of the global metadata indexes points at the surviving thread only
    members = {m for k in left if keys.is_metadata_index(k) for m in client.zrange(k, 0, -1)}
    assert bool(members) == bool(driver.saver.indexed_metadata)  # no global index on a cluster
    assert all(keys.tag("user:10").encode() in m for m in members)
    assert snapshot(client, keys.thread_keys_pattern("user:10")) == survivor_content
    gone = await driver.get_state(graph, victim)
    assert (gone.values, gone.next, gone.tasks) == ({}, (), ())
    assert await driver.history(graph, victim) == []
    assert await driver.checkpoints(victim) == []
    kept = await driver.get_state(graph, survivor)
    assert kept.values == survivor_result
    assert len(await driver.history(graph, survivor)) == 5

    # the deleted thread id starts afresh
    again = await driver.invoke(graph, {"value": "w", "trail": ["again"]}, victim)
    assert (again["value"], again["trail"]) == ("w|before", ["again", "before"])
    assert [s.metadata["step"] for s in await driver.history(graph, victim)] == [1, 0, -1]
