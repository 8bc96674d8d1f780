"""A small real graph whose threads have what a migration must carry: a subgraph namespace,
an interrupt (pending writes in both namespaces, with task paths), parallel branches, and a
resumed run."""

from __future__ import annotations

import operator
from typing import Annotated, Any, TypedDict

from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command, interrupt


class State(TypedDict):
    log: Annotated[list[str], operator.add]


def _ask(state: State) -> dict[str, Any]:
    answer = interrupt("continue?")
    return {"log": [f"answer:{answer}"]}


def build(checkpointer: BaseCheckpointSaver[Any]) -> Any:
    sub = StateGraph(State)
    sub.add_node("inner", lambda s: {"log": ["inner"]})
    sub.add_node("ask", _ask)
    sub.add_edge(START, "inner")
    sub.add_edge("inner", "ask")
    sub.add_edge("ask", END)
    graph = StateGraph(State)
    graph.add_node("first", lambda s: {"log": ["first"]})
    graph.add_node("side", lambda s: {"log": ["side"]})
    graph.add_node("child", sub.compile())
    graph.add_edge(START, "first")
    graph.add_edge("first", "side")
    graph.add_edge("first", "child")
    graph.add_edge("side", END)
    graph.add_edge("child", END)
    return graph.compile(checkpointer=checkpointer)


# the final state of each kind of thread
FINISHED_LOG = ["start", "first", "start", "first", "inner", "answer:yes", "side"]
INTERRUPTED_LOG = ["start", "first", "side"]
# checkpoints per namespace: root, subgraph
FINISHED_COUNTS = (4, 4)
INTERRUPTED_COUNTS = (3, 3)


def write_threads(saver: BaseCheckpointSaver[Any], base: str) -> dict[str, list[str]]:
    """Three threads: ``{base}-done`` and ``{base}-also`` interrupted in the subgraph, then
    resumed to the end; ``{base}-open`` left at the interrupt (pending writes in both
    namespaces). Returns the final log of each thread."""
    graph = build(saver)
    threads = {f"{base}-done": True, f"{base}-open": False, f"{base}-also": True}
    for thread_id, finish in threads.items():
        config = {"configurable": {"thread_id": thread_id}}
        graph.invoke({"log": ["start"]}, config)
        if finish:
            graph.invoke(Command(resume="yes"), config)
    return {t: FINISHED_LOG if finish else INTERRUPTED_LOG for t, finish in threads.items()}


def memory_saver() -> InMemorySaver:
    """For ``python:tests.migrate_sources.graph:memory_saver``: a saver with two threads."""
    saver = InMemorySaver()
    write_threads(saver, "factory")
    return saver
