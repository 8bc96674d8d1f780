"""The SQL sources: langgraph-checkpoint-postgres and langgraph-checkpoint-sqlite, whose
threads, namespaces and task paths are read from their tables."""

from __future__ import annotations

import contextlib
import sqlite3
from typing import Any
from urllib.parse import unquote

from .common import WriteKey
from .source import Source


class PostgresSource(Source):
    has_task_paths = True

    def __init__(self, url: str, stack: contextlib.ExitStack) -> None:
        import psycopg
        from langgraph.checkpoint.postgres import PostgresSaver

        super().__init__(stack.enter_context(PostgresSaver.from_conn_string(url)), name="postgres")
        self.conn = stack.enter_context(psycopg.connect(url, autocommit=True))

    def _rows(self, sql: str, *args: Any) -> list[tuple[Any, ...]]:
        with self.conn.cursor() as cur:
            cur.execute(sql, args)
            return list(cur.fetchall())

    def thread_ids(self) -> list[str]:
        return [r[0] for r in self._rows("SELECT DISTINCT thread_id FROM checkpoints ORDER BY 1")]

    def namespaces(self, thread_id: str) -> list[str]:
        sql = "SELECT DISTINCT checkpoint_ns FROM checkpoints WHERE thread_id = %s ORDER BY 1"
        return [r[0] for r in self._rows(sql, thread_id)]

    def task_paths(self, thread_id: str) -> dict[WriteKey, str]:
        sql = (
            "SELECT DISTINCT checkpoint_ns, checkpoint_id, task_id, task_path "
            "FROM checkpoint_writes WHERE thread_id = %s"
        )
        return {(r[0], r[1], r[2]): r[3] for r in self._rows(sql, thread_id)}


def _sqlite_path(url: str) -> str:
    # SQLAlchemy's convention: sqlite:///relative/path, sqlite:////absolute/path
    rest = url[len("sqlite:") :]
    if not rest.startswith("///") or len(rest) == 3:
        raise ValueError(
            f"invalid SQLite URL {url!r}: use sqlite:///relative.db or sqlite:////absolute.db"
        )
    return unquote(rest[3:].split("?", 1)[0])


class SqliteSource(Source):
    has_task_paths = True

    def __init__(self, url: str, stack: contextlib.ExitStack) -> None:
        from langgraph.checkpoint.sqlite import SqliteSaver

        path = _sqlite_path(url)
        # read-only: a typo in the path fails instead of creating an empty database
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, check_same_thread=False)
        stack.callback(conn.close)
        saver = SqliteSaver(conn)
        saver.is_setup = True  # setup() would create tables: the source is only read
        super().__init__(saver, name="sqlite")
        self.conn = conn

    def thread_ids(self) -> list[str]:
        rows = self.conn.execute("SELECT DISTINCT thread_id FROM checkpoints ORDER BY 1")
        return [str(r[0]) for r in rows]

    def namespaces(self, thread_id: str) -> list[str]:
        rows = self.conn.execute(
            "SELECT DISTINCT checkpoint_ns FROM checkpoints WHERE thread_id = ? ORDER BY 1",
            (thread_id,),
        )
        return [str(r[0]) for r in rows]

    def task_paths(self, thread_id: str) -> dict[WriteKey, str]:
        columns = {r[1] for r in self.conn.execute("PRAGMA table_info(writes)")}
        if "task_path" not in columns:  # a database written before task_path existed
            return {}
        rows = self.conn.execute(
            "SELECT DISTINCT checkpoint_ns, checkpoint_id, task_id, task_path FROM writes "
            "WHERE thread_id = ?",
            (thread_id,),
        )
        return {(str(r[0]), str(r[1]), str(r[2])): str(r[3]) for r in rows}
