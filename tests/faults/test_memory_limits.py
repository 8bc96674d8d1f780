"""A full server (maxmemory with the noeviction policy): writes are refused with a clear
error and write nothing; reads and deletes still work, and free the memory writes need."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
import redis

from langgraph.checkpoint.rediskv import RedisSaver, ServerFullError

from ..conftest import PrivateServer
from ..integration.test_contract import cfg, make_checkpoint

# the server's own use comes first: about 1.2 MB of the saver's scripts (each with its
# includes) once every operation has run, and its function library, then the room for about
# a dozen values (a copy of a thread of 3 values after a refused one needs 3.8 MB: at 4.0 MB,
# 25 KB more library code left it no room)
MAXMEMORY = 4_300_000
VALUE = 200_000  # bytes per checkpoint: a long document pasted into a chat


@pytest.fixture
def full_server(tmp_path: Path) -> PrivateServer:  # type: ignore[misc]
    server = PrivateServer(
        tmp_path, maxmemory=str(MAXMEMORY), **{"maxmemory-policy": "noeviction"}
    ).start()
    yield server
    server.stop()


def document(n: int) -> bytes:
    # different bytes per checkpoint, random so that nothing compresses or shares (a pasted
    # document compresses too, but then it takes more of them to fill the server)
    return random.Random(n).randbytes(VALUE)


def put_big(saver: RedisSaver, thread_id: str, n: int, parent: str | None) -> str:
    version = saver.get_next_version(None, None)
    checkpoint = make_checkpoint({"doc": document(n)}, {"doc": version})
    saver.put(cfg(thread_id, checkpoint_id=parent), checkpoint, {"step": n}, {"doc": version})
    return checkpoint["id"]


def test_a_full_server_refuses_writes_and_writes_nothing(full_server: PrivateServer) -> None:
    admin = redis.Redis(port=full_server.port)
    with RedisSaver(full_server.url, prefix="app") as saver:
        stored: list[str] = []
        refused = 0
        for n in range(100):
            try:
                stored.append(put_big(saver, "t", n, stored[-1] if stored else None))
            except ServerFullError as exc:
                refused += 1
                assert "over its maxmemory" in str(exc) and "nothing was written" in str(exc)
        used = int(admin.info("memory")["used_memory"])
        # a script is checked when it starts: at most one value past the limit
        assert used < MAXMEMORY + 2 * VALUE
        assert refused == 100 - len(stored) and len(stored) < 20
        listed = [t.checkpoint["id"] for t in saver.list(cfg("t"))]
        assert listed == stored[::-1]  # reads work, and a refused put left nothing
        keys_before = sorted(admin.scan_iter(match="app:*"))

        with pytest.raises(ServerFullError):
            saver.put_writes(cfg("t", checkpoint_id=stored[-1]), [("doc", document(-1))], "task")
        with pytest.raises(ServerFullError):
            saver.copy_thread("t", "copy")
        assert sorted(admin.scan_iter(match="app:*")) == keys_before
        assert saver.check_invariants() == []

        # deleting works on a full server and makes room again
        saver.delete_thread("t")
        assert saver.get_tuple(cfg("t")) is None
        put_big(saver, "t", 0, None)
        assert saver.get_tuple(cfg("t")) is not None


@pytest.mark.parametrize("refused", ["chunk", "publish"])
def test_a_copy_the_server_refuses_midway_leaves_nothing(
    full_server: PrivateServer, refused: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """maxmemory is checked per command: a copy to a new thread can begin (a small write)
    and be refused by its next step. Its job was left for whoever reaped the target next
    (it turned up when stored values grew by a few bytes: the test above caught an
    app:gc:{copy} left by its refused copy_thread); the copy discards it at once now."""
    admin = redis.Redis(port=full_server.port)
    with RedisSaver(full_server.url, prefix="app") as saver:
        parent = None
        for n in range(3):
            parent = put_big(saver, "t", n, parent)
        keys_before = sorted(admin.scan_iter(match="app:*"))
        send = saver._send

        def full_at_step(request: object) -> object:
            if getattr(request, "name", "") == "import_thread" and refused in request.args:  # type: ignore[attr-defined]
                raise ServerFullError(f"the server refused import_thread's {refused} (test)")
            return send(request)

        monkeypatch.setattr(saver, "_send", full_at_step)
        with pytest.raises(ServerFullError, match=f"refused import_thread's {refused}"):
            saver.copy_thread("t", "copy")
        assert sorted(admin.scan_iter(match="app:*")) == keys_before
        monkeypatch.setattr(saver, "_send", send)
        saver.copy_thread("t", "copy")  # and the copy goes through once there is room
        assert [t.checkpoint["id"] for t in saver.list(cfg("copy"))] == [
            t.checkpoint["id"] for t in saver.list(cfg("t"))
        ]
        assert saver.check_invariants() == []
