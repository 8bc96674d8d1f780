"""The graph the Agent Server store test serves: a bot that remembers what a user tells it.

``note``, a sync node (the server runs it in a thread, so its store calls are the sync ones
of an async store), stores the last message of the run under ``("memories", <user_id>)``
(the run's ``configurable.user_id``); ``remember``, an async node, answers with every memory
of that user it finds, oldest first: ``"I remember: <text>; <text>"``. Two threads of one
user share what they remember; the test reads the store back over HTTP and in Redis.
"""

from __future__ import annotations

from typing import Annotated, Any

from langchain_core.messages import AIMessage, AnyMessage
from langchain_core.runnables import RunnableConfig
from langgraph.config import get_store
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from typing_extensions import TypedDict


class State(TypedDict):
    messages: Annotated[list[AnyMessage], add_messages]


def note(state: State, config: RunnableConfig) -> dict[str, Any]:
    last = state["messages"][-1]
    get_store().put(
        ("memories", config["configurable"]["user_id"]), str(last.id), {"text": last.content}
    )
    return {}


async def remember(state: State, config: RunnableConfig) -> dict[str, Any]:
    found = await get_store().asearch(("memories", config["configurable"]["user_id"]), limit=100)
    texts = [item.value["text"] for item in sorted(found, key=lambda item: item.created_at)]
    n = sum(1 for m in state["messages"] if m.type == "human")
    return {"messages": [AIMessage(content="I remember: " + "; ".join(texts), id=f"ai-{n}")]}


builder = StateGraph(State)
builder.add_node("note", note)
builder.add_node("remember", remember)
builder.add_edge(START, "note")
builder.add_edge("note", "remember")
builder.add_edge("remember", END)
graph = builder.compile()
