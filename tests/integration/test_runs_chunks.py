"""delete_for_runs with more runs than one call takes (Limits.run_chunk): the result must not
depend on what else touches the thread between the calls."""

from __future__ import annotations

import re
from typing import Any

import pytest
import redis
from langchain_core.messages import HumanMessage
from langchain_core.runnables import RunnableConfig

from langgraph.checkpoint.rediskv import RedisSaver
from langgraph.checkpoint.rediskv.core import ScriptCall, jobs
from langgraph.checkpoint.rediskv.core.limits import Limits

from ..conftest import keys_of, saver_with_limits, set_limits
from .test_delta import chat_graph


def six_runs(saver: RedisSaver) -> None:
    """Thread t: six runs of a chat whose messages are a DeltaChannel never snapshotted, so
    every checkpoint is rebuilt from the writes of all its ancestors."""
    graph = chat_graph(saver, snapshot_frequency=100)
    for turn in range(6):
        config: RunnableConfig = {"configurable": {"thread_id": "t", "run_id": f"run-{turn}"}}
        graph.invoke({"messages": [HumanMessage(content=f"hi {turn}", id=f"h{turn}")]}, config)


def delete_runs_in_chunks(
    saver: RedisSaver, runs: list[str], monkeypatch: pytest.MonkeyPatch, between: str
) -> None:
    """delete_for_runs(runs) one run per call; ``between``: what runs on the thread after
    each call but the last ("reap": another client reaps it; "nothing")."""
    set_limits(monkeypatch, saver, run_chunk=1)
    send = saver._send

    def interleaved(request: Any) -> Any:
        reply = send(request)
        staged = isinstance(request, ScriptCall) and request.name == "delete_for_runs"
        if between == "reap" and staged and request.args[2] == 0:
            saver._run(jobs.finish_reaping(saver._core, "t"))
        return reply

    monkeypatch.setattr(saver, "_send", interleaved)
    saver.delete_for_runs(runs)
    monkeypatch.undo()


@pytest.mark.parametrize("between", ["nothing", "reap"])
def test_chunked_delete_for_runs_equals_one_call(
    server_url: str, prefix: str, monkeypatch: pytest.MonkeyPatch, between: str
) -> None:
    client = redis.Redis.from_url(server_url)
    outcome = []
    for name, chunked in (("one", False), ("chunks", True)):
        with RedisSaver(server_url, prefix=f"{prefix}{name}") as saver:
            six_runs(saver)
            # checkpoint ids differ between the two threads: keys name them by their position
            ids = [t.checkpoint["id"] for t in saver.list({"configurable": {"thread_id": "t"}})]
            # run-4's checkpoints are kept by a single call only while run-5's depend on them
            if chunked:
                delete_runs_in_chunks(saver, ["run-4", "run-5"], monkeypatch, between)
            else:
                saver.delete_for_runs(["run-4", "run-5"])
            listed = [
                t.metadata["run_id"] for t in saver.list({"configurable": {"thread_id": "t"}})
            ]
            keys = []
            for key in keys_of(client, f"{prefix}{name}:*"):
                for position, checkpoint_id in enumerate(ids):
                    key = key.replace(checkpoint_id, f"#{position}")
                # (a channel version ends in a random hash: LangGraph's get_next_version)
                if key.startswith(f"{prefix}{name}:w:"):
                    continue  # (which checkpoints' writes have a hash varies run to run)
                keys.append(re.sub(r"\.[0-9a-f]+$", "", key.split(":", 1)[1]))
            outcome.append((listed, sorted(keys), saver.check_invariants()))
    one, chunks = outcome
    assert one[0] == ["run-3"] * 3 + ["run-2"] * 3 + ["run-1"] * 3 + ["run-0"] * 3
    assert one[2] == []
    assert chunks == one


def test_client_dying_between_chunks_deletes_nothing(
    server_url: str, prefix: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    client = redis.Redis.from_url(server_url)
    with saver_with_limits(server_url, Limits(run_chunk=1), prefix=prefix) as saver:
        six_runs(saver)
        send = saver._send

        def dies_after_the_first_chunk(request: Any) -> Any:
            reply = send(request)
            if isinstance(request, ScriptCall) and request.name == "delete_for_runs":
                raise ConnectionError("client died")
            return reply

        monkeypatch.setattr(saver, "_send", dies_after_the_first_chunk)
        with pytest.raises(ConnectionError):
            saver.delete_for_runs(["run-4", "run-5"])
        monkeypatch.setattr(saver, "_send", send)
        # the staged run waits for a last call that never comes, then expires; no job holds it
        (staged,) = keys_of(client, f"{prefix}:gc:*")
        assert staged.startswith(f"{prefix}:gc:{{t}}:s:")
        assert client.smembers(staged) == {b"run-4"}
        assert 86000 < client.ttl(staged) <= 86400
        # the checker names it as what it is (and reaps nothing of the thread)
        assert [(p.problem, p.key) for p in saver.check_invariants()] == [
            ("key not reachable from any index, expiring", staged)
        ]
        listed = [t.metadata["run_id"] for t in saver.list({"configurable": {"thread_id": "t"}})]
        assert listed == [f"run-{run}" for run in range(5, -1, -1) for _ in range(3)]
