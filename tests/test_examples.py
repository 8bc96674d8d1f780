"""The FastAPI chat backend in examples/, driven over HTTP, against the server under test."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from .conftest import keys_of


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
    keys = keys_of(client, f"{prefix}:*")  # type: ignore[arg-type]
    thread_keys = [k for k in keys if ":mi:" not in k]  # not the global metadata indexes
    assert thread_keys and all("{bob}" in k for k in thread_keys)
