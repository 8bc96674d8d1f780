"""The graph the Agent Server test serves: a chat bot without an LLM.

``bot`` answers the last message with ``"echo <n>: <text>"`` (``n`` is the number of human
messages so far), under the id ``ai-<n>``: every value the test reads back is known in
advance. A message ``"slow"`` makes it wait for a minute first, so that a run is still going
when the test starts another one with ``multitask_strategy="rollback"``.
"""

from __future__ import annotations

import asyncio
from typing import Annotated, Any

from langchain_core.messages import AIMessage, AnyMessage
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from typing_extensions import TypedDict


class State(TypedDict):
    messages: Annotated[list[AnyMessage], add_messages]


async def bot(state: State) -> dict[str, Any]:
    last = state["messages"][-1]
    if last.content == "slow":
        await asyncio.sleep(60)
    n = sum(1 for m in state["messages"] if m.type == "human")
    return {"messages": [AIMessage(content=f"echo {n}: {last.content}", id=f"ai-{n}")]}


builder = StateGraph(State)
builder.add_node("bot", bot)
builder.add_edge(START, "bot")
builder.add_edge("bot", END)
graph = builder.compile()
