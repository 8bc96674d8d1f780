"""A chat backend on FastAPI whose conversations live in Redis (or Valkey).

Run it with ``REDIS_URL=redis://localhost:6379/0 uvicorn examples.fastapi_chat:app``; then
``POST /chat/{thread_id}`` with ``{"message": "hi"}`` talks, ``GET /chat/{thread_id}`` reads
the conversation back (from any worker process), ``DELETE /chat/{thread_id}`` forgets it.
The bot is a stand-in for an LLM call: it echoes, so the example runs anywhere.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI, HTTPException, Request
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.graph import END, START, MessagesState, StateGraph
from pydantic import BaseModel

from langgraph.checkpoint.rediskv import AsyncRedisSaver


async def bot(state: MessagesState) -> dict[str, Any]:
    said = sum(isinstance(m, HumanMessage) for m in state["messages"])
    return {"messages": [AIMessage(f"echo #{said}: {state['messages'][-1].content}")]}


def build_graph(saver: AsyncRedisSaver) -> Any:
    builder = StateGraph(MessagesState)
    builder.add_node("bot", bot)
    builder.add_edge(START, "bot")
    builder.add_edge("bot", END)
    return builder.compile(checkpointer=saver)


@asynccontextmanager
async def lifespan(app: FastAPI) -> AsyncIterator[None]:
    # one saver (one connection pool) for the whole process
    async with AsyncRedisSaver.from_conn_string(
        os.environ.get("REDIS_URL"),
        prefix=os.environ.get("CHAT_PREFIX", "chat"),
        ttl={"default_ttl": 60 * 24, "refresh_on_read": True},  # idle chats go after a day
    ) as saver:
        app.state.saver = saver
        app.state.graph = build_graph(saver)
        yield


app = FastAPI(lifespan=lifespan)


class Say(BaseModel):
    message: str


class Turn(BaseModel):
    role: str
    content: str


def transcript(values: dict[str, Any]) -> list[Turn]:
    return [
        Turn(role="user" if isinstance(m, HumanMessage) else "bot", content=str(m.content))
        for m in values.get("messages", [])
    ]


@app.post("/chat/{thread_id}")
async def chat(thread_id: str, say: Say, request: Request) -> dict[str, Any]:
    config = {"configurable": {"thread_id": thread_id}}
    result = await request.app.state.graph.ainvoke(
        {"messages": [HumanMessage(say.message)]}, config
    )
    return {"reply": result["messages"][-1].content, "turns": len(result["messages"]) // 2}


@app.get("/chat/{thread_id}")
async def history(thread_id: str, request: Request) -> list[Turn]:
    state = await request.app.state.graph.aget_state({"configurable": {"thread_id": thread_id}})
    if not state.values:
        raise HTTPException(status_code=404, detail=f"no conversation {thread_id!r}")
    return transcript(state.values)


@app.delete("/chat/{thread_id}")
async def forget(thread_id: str, request: Request) -> dict[str, str]:
    await request.app.state.saver.adelete_thread(thread_id)
    return {"deleted": thread_id}
