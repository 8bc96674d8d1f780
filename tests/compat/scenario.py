"""The graphs and turns that tests/e2e/test_compat.py runs with the previous release (in a
subprocess, tests/compat/old_saver.py) and this one (in-process), alternating on the same
threads. This module imports whichever package ``langgraph.checkpoint.rediskv`` is on the
path, so it uses only the API both releases have."""

from __future__ import annotations

import operator
from typing import Annotated, Any, TypedDict, cast

from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, RemoveMessage
from langchain_core.runnables import RunnableConfig
from langgraph.channels.delta import DeltaChannel
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.graph.message import _messages_delta_reducer
from langgraph.types import Command, StateSnapshot, interrupt

Graph = Any  # a compiled StateGraph

# kinds of thread -> number of turns each runs
TURNS = {"chat": 8, "ask": 4, "nested": 4, "delta": 7}
# text that makes a chat's messages channel pass 1 KB in a few turns: its values are then
# compressed against a base (reference compression), which both releases must read
FILLER = " ".join(f"w{n * 7919 % 1000}" for n in range(60))


def chat_graph(saver: BaseCheckpointSaver[Any] | None) -> Graph:
    """START -> bot -> END; the bot answers the last message."""

    def bot(state: MessagesState) -> dict[str, Any]:
        last = state["messages"][-1]
        return {"messages": [AIMessage(content=f"re: {last.content}", id=f"ai-{last.id}")]}

    builder = StateGraph(MessagesState)
    builder.add_node("bot", bot)
    builder.add_edge(START, "bot")
    builder.add_edge("bot", END)
    return builder.compile(checkpointer=saver)


class AskState(TypedDict, total=False):
    topic: str
    name: str
    greeting: str


def ask_graph(saver: BaseCheckpointSaver[Any] | None) -> Graph:
    """START -> prepare -> ask (interrupts) -> greet -> END."""

    def prepare(state: AskState) -> AskState:
        return {"topic": state["topic"].upper()}

    def ask(state: AskState) -> AskState:
        return {"name": interrupt({"question": "your name?", "topic": state["topic"]})}

    def greet(state: AskState) -> AskState:
        return {"greeting": f"Hello, {state['name']}! ({state['topic']})"}

    builder = StateGraph(AskState)
    builder.add_node("prepare", prepare)
    builder.add_node("ask", ask)
    builder.add_node("greet", greet)
    builder.add_edge(START, "prepare")
    builder.add_edge("prepare", "ask")
    builder.add_edge("ask", "greet")
    builder.add_edge("greet", END)
    return builder.compile(checkpointer=saver)


class ChildState(TypedDict):
    value: str
    steps: Annotated[list[str], operator.add]


class ParentState(TypedDict):
    value: str
    trail: Annotated[list[str], operator.add]


def nested_graph(saver: BaseCheckpointSaver[Any] | None) -> Graph:
    """START -> before -> child -> after -> END; child is a subgraph sub_a -> sub_ask
    (interrupts) -> sub_b, with a checkpoint namespace of its own."""

    def sub_a(state: ChildState) -> ChildState:
        return {"value": state["value"] + "|sub_a", "steps": ["sub_a"]}

    def sub_ask(state: ChildState) -> ChildState:
        answer = interrupt({"question": "continue?", "value": state["value"]})
        return {"value": f"{state['value']}|{answer}", "steps": ["sub_ask"]}

    def sub_b(state: ChildState) -> ChildState:
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
        return {"value": state["value"] + "|before", "trail": ["before"]}

    def after(state: ParentState) -> ParentState:
        return {"value": state["value"] + "|after", "trail": ["after"]}

    parent = StateGraph(ParentState)
    parent.add_node("before", before)
    parent.add_node("child", child.compile())
    parent.add_node("after", after)
    parent.add_edge(START, "before")
    parent.add_edge("before", "child")
    parent.add_edge("child", "after")
    parent.add_edge("after", END)
    return parent.compile(checkpointer=saver)


def delta_graph(saver: BaseCheckpointSaver[Any] | None) -> Graph:
    """A chat whose messages channel is a DeltaChannel (a snapshot every 3 updates); every
    4th reply removes the oldest message."""
    channel: DeltaChannel[Any] = DeltaChannel(
        cast(Any, _messages_delta_reducer), snapshot_frequency=3
    )
    State = TypedDict("State", {"messages": Annotated[list[AnyMessage], channel]})  # noqa: UP013

    def bot(state: Any) -> dict[str, Any]:
        messages = state["messages"]
        last = messages[-1]
        out: list[Any] = [AIMessage(content=f"re: {last.content}", id=f"ai-{last.id}")]
        if len(messages) % 4 == 3:
            out.append(RemoveMessage(id=str(messages[0].id)))
        return {"messages": out}

    builder: Any = StateGraph(State)
    builder.add_node("bot", bot)
    builder.add_edge(START, "bot")
    builder.add_edge("bot", END)
    return builder.compile(checkpointer=saver)


BUILDERS = {"chat": chat_graph, "ask": ask_graph, "nested": nested_graph, "delta": delta_graph}


def turn_input(kind: str, name: str, turn: int) -> Any:
    """What turn ``turn`` of conversation ``name`` sends to a graph of ``kind``."""
    if kind in ("chat", "delta"):
        text = f"{name} turn {turn}: {FILLER}"
        return {"messages": [HumanMessage(content=text, id=f"{name}-h{turn}")]}
    if turn % 2:  # ask and nested: every other turn answers the interrupt
        return Command(resume=f"{name}-answer{turn}")
    if kind == "ask":
        return {"topic": f"{name} topic {turn}"}
    return {"value": f"{name}-{turn}", "trail": []}


def run_config(thread: str, turn: int) -> RunnableConfig:
    """The thread's config for a turn, with a run id per turn (for delete_for_runs)."""
    return {"configurable": {"thread_id": thread}, "metadata": {"run_id": run_id(thread, turn)}}


def run_id(thread: str, turn: int) -> str:
    return f"{thread}-run{turn}"


def snapshot_row(snapshot: StateSnapshot) -> tuple[Any, ...]:
    """What a state snapshot must equal across savers (ids and times differ): step, source,
    next nodes, values, the interrupts, and (get_state with subgraphs) a subgraph's state."""
    interrupts = tuple(i.value for task in snapshot.tasks for i in task.interrupts)
    children = tuple(
        snapshot_row(task.state) for task in snapshot.tasks if isinstance(task.state, StateSnapshot)
    )
    metadata = snapshot.metadata or {}
    return (
        metadata.get("step"),
        metadata.get("source"),
        snapshot.next,
        snapshot.values,
        interrupts,
        children,
    )


class Runner:
    """Runs the turns of every kind of graph on one saver."""

    def __init__(self, saver: BaseCheckpointSaver[Any] | None) -> None:
        self.graphs = {kind: build(saver) for kind, build in BUILDERS.items()}

    def turn(self, kind: str, thread: str, name: str, turn: int) -> None:
        self.graphs[kind].invoke(turn_input(kind, name, turn), run_config(thread, turn))

    def read(self, kind: str, thread: str) -> dict[str, Any]:
        graph, config = self.graphs[kind], {"configurable": {"thread_id": thread}}
        return {
            "state": snapshot_row(graph.get_state(config, subgraphs=True)),
            "history": [snapshot_row(s) for s in graph.get_state_history(config)],
        }


def checkpoints(saver: BaseCheckpointSaver[Any], thread: str) -> list[tuple[str, str, Any]]:
    """(namespace, id, run id) of every checkpoint of the thread that list() gives."""
    return [
        (
            t.config["configurable"].get("checkpoint_ns", ""),
            t.config["configurable"]["checkpoint_id"],
            t.metadata.get("run_id"),
        )
        for t in saver.list({"configurable": {"thread_id": thread}})
    ]
