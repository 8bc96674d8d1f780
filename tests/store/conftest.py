"""What the store's tests share."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from langgraph.store.rediskv import RedisStore

from ..conftest import new_prefix


@pytest.fixture
def store(server_url: str) -> Iterator[RedisStore]:
    """A RedisStore on the suite's server, on a prefix of its own (a test file that needs
    other settings defines its own ``store``)."""
    with RedisStore.from_conn_string(server_url, prefix=new_prefix()) as s:
        yield s
