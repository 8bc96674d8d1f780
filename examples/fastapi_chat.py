"""A chat backend on FastAPI whose conversations live in Redis (or Valkey).

Run it with ``REDIS_URL=redis://localhost:6379/0 uvicorn examples.fastapi_chat:app``; then
``POST /chat/{thread_id}`` with ``{"message": "hi"}`` talks, ``GET /chat/{thread_id}`` reads
the conversation back (from any worker process), ``DELETE /chat/{thread_id}`` forgets it.
The bot is a stand-in for an LLM call: it echoes, so the example runs anywhere.

One turn at a time per conversation. Two turns of one thread that run at once both start
from the same checkpoint, and the one that finishes last replaces the other's messages
(LangGraph does this with any checkpointer, InMemorySaver too): of 20 messages sent to one
thread at once, 19 were lost. So each turn (and a delete) holds the thread's lock
(:class:`TurnLocks`): concurrent turns wait and run one after the other, and every message
is kept. Waiting rather than refusing with 409 Conflict: a chat client that sends a second
message before the first reply (a double click, two tabs) should see both answered, not
an error to retry. The locks live in the process, one per thread with a turn in progress
(dropped when its last turn ends, so they never pile up); with several worker processes,
route each thread to one worker, or take the lock in Redis instead.
"""

from __future__ import annotations

import asyncio
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


class TurnLocks:
    """An asyncio.Lock per thread id, held by a turn; a lock exists only while a turn holds
    it or waits for it."""

    def __init__(self) -> None:
        self._locks: dict[str, asyncio.Lock] = {}
        self._users: dict[str, int] = {}  # turns holding or waiting for each lock

    @asynccontextmanager
    async def hold(self, thread_id: str) -> AsyncIterator[None]:
        lock = self._locks.setdefault(thread_id, asyncio.Lock())
        self._users[thread_id] = self._users.get(thread_id, 0) + 1
        try:
            async with lock:
                yield
        finally:  # also when the request is cancelled while it waits
            self._users[thread_id] -= 1
            if not self._users[thread_id]:
                del self._users[thread_id], self._locks[thread_id]

    def held(self) -> int:
        """Threads with a turn in progress or waiting."""
        return len(self._locks)


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
        app.state.turns = TurnLocks()
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
    async with request.app.state.turns.hold(thread_id):  # one turn at a time per thread
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
    async with request.app.state.turns.hold(thread_id):  # not under a turn in progress
        await request.app.state.saver.adelete_thread(thread_id)
    return {"deleted": thread_id}
