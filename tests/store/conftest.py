"""A Redis Stack (RediSearch: FT.* with vectors) for the tests of the store's server vector
search, started once for the session from the wheels tests/servers.py fetches."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from ..servers import RedisStack


@pytest.fixture(scope="session")
def stack_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    server = RedisStack(tmp_path_factory.mktemp("redis-stack")).start()
    try:
        yield server.url
    finally:
        server.stop()
