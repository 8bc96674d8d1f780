"""The FastAPI chat backend in examples/, driven over HTTP, against the server under test."""

from __future__ import annotations

import asyncio

import httpx
import pytest
from fastapi.testclient import TestClient

from ..conftest import data_keys


@pytest.fixture
def chat_app(server_url: str, prefix: str, monkeypatch: pytest.MonkeyPatch) -> object:
    monkeypatch.setenv("REDIS_URL", server_url)
    monkeypatch.setenv("CHAT_PREFIX", prefix)
    from examples.fastapi_chat import app

    return app


def test_fastapi_chat_backend(chat_app: object, prefix: str, client: object) -> None:
    with TestClient(chat_app) as http:  # type: ignore[arg-type]
        assert http.post("/chat/ana", json={"message": "hello"}).json() == {
            "reply": "echo #1: hello",
            "turns": 1,
        }
        assert http.post("/chat/ana", json={"message": "again"}).json() == {
            "reply": "echo #2: again",
            "turns": 2,
        }
        http.post("/chat/bob", json={"message": "other thread"})
    # a new process (a new app lifespan, a new saver) reads the same conversation back
    with TestClient(chat_app) as http:  # type: ignore[arg-type]
        assert http.get("/chat/ana").json() == [
            {"role": "user", "content": "hello"},
            {"role": "bot", "content": "echo #1: hello"},
            {"role": "user", "content": "again"},
            {"role": "bot", "content": "echo #2: again"},
        ]
        assert http.delete("/chat/ana").json() == {"deleted": "ana"}
        assert http.get("/chat/ana").status_code == 404
        assert http.get("/chat/bob").json()[1] == {
            "role": "bot",
            "content": "echo #1: other thread",
        }
    keys = data_keys(client, prefix)  # type: ignore[arg-type]
    thread_keys = [k for k in keys if ":mi:" not in k and ":tm:" not in k]  # not global
    assert thread_keys and all("{bob}" in k for k in thread_keys)


async def test_concurrent_turns_on_one_thread_keep_every_message(chat_app: object) -> None:
    from examples.fastapi_chat import app

    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://chat") as http:
            said = [f"message {i}" for i in range(20)]
            replies = await asyncio.gather(
                *(http.post("/chat/crowd", json={"message": text}) for text in said)
            )
            assert [r.status_code for r in replies] == [200] * 20
            # turns ran one after the other: each saw every turn before it
            assert sorted(r.json()["turns"] for r in replies) == list(range(1, 21))
            transcript = (await http.get("/chat/crowd")).json()
        assert len(transcript) == 40
        assert sorted(t["content"] for t in transcript[::2]) == sorted(said)
        assert [t["role"] for t in transcript] == ["user", "bot"] * 20
        assert [t["content"] for t in transcript[1::2]] == [
            f"echo #{n}: {user['content']}" for n, user in enumerate(transcript[::2], start=1)
        ]
        assert app.state.turns.held() == 0  # no lock is left behind once the turns are done
