"""Delta channels: real graphs whose ``messages`` channel is a LangGraph ``DeltaChannel``.

A DeltaChannel stores its value only every ``snapshot_frequency`` updates; in between LangGraph
rebuilds it from the nearest stored value (the seed) and the writes of the ancestors, asking the
saver with ``get_delta_channel_history`` (one script call here). Every scenario runs twice
through the ``runner`` fixture: ``sync`` (RedisSaver, invoke) and ``async`` (AsyncRedisSaver,
ainvoke). Values are compared to the ones the live run returned, read back by brand-new saver
instances (as after a process restart).
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from typing import Annotated, Any, TypedDict, cast

import pytest
import redis
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, RemoveMessage
from langchain_core.runnables import RunnableConfig
from langgraph.channels.delta import DeltaChannel
from langgraph.checkpoint.base import (
    BaseCheckpointSaver,
    CheckpointTuple,
    DeltaChannelHistory,
    empty_checkpoint,
)
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import _messages_delta_reducer

from langgraph.checkpoint.rediskv import AsyncRedisSaver, RedisSaver
from langgraph.checkpoint.rediskv.keys import KeySchema

from ..conftest import RoundTrips, keys_of, set_limits

Saver = RedisSaver | AsyncRedisSaver
Graph = Any  # a compiled StateGraph


# -- graphs --------------------------------------------------------------------------------------
def chat_graph(saver: BaseCheckpointSaver[Any] | None, snapshot_frequency: int) -> Graph:
    """START -> bot -> END; ``messages`` is a DeltaChannel. Every 10th reply also removes the
    oldest message, so the rebuild has to replay a tombstone in the right place."""

    channel: DeltaChannel[Any] = DeltaChannel(
        cast(Any, _messages_delta_reducer), snapshot_frequency=snapshot_frequency
    )
    # functional form: the annotation refers to a local, which postponed evaluation can't see
    State = TypedDict("State", {"messages": Annotated[list[AnyMessage], channel]})  # noqa: UP013

    def bot(state: Any) -> dict[str, Any]:
        messages = state["messages"]
        last = messages[-1]
        out: list[Any] = [
            AIMessage(content=f"re: {last.content} ({len(messages)} so far)", id=f"ai-{last.id}")
        ]
        if len(messages) % 10 == 9:
            out.append(RemoveMessage(id=str(messages[0].id)))
        return {"messages": out}

    builder: Any = StateGraph(State)
    builder.add_node("bot", bot)
    builder.add_edge(START, "bot")
    builder.add_edge("bot", END)
    return builder.compile(checkpointer=saver)


def fan_out_graph(saver: BaseCheckpointSaver[Any] | None) -> Graph:
    """START -> (zeta, alpha, mid) -> END in one superstep, each writing ``messages``. The nodes
    finish in a different order than LangGraph applies their writes (by task path), and the
    reducer keeps message order, so a rebuild that orders writes wrongly shows."""

    channel: DeltaChannel[Any] = DeltaChannel(
        cast(Any, _messages_delta_reducer), snapshot_frequency=1000
    )
    State = TypedDict("State", {"messages": Annotated[list[AnyMessage], channel]})  # noqa: UP013

    def node(name: str, delay: float) -> Callable[[Any], dict[str, Any]]:
        def run(state: Any) -> dict[str, Any]:
            time.sleep(delay)
            turn = len(state["messages"])
            return {
                "messages": [
                    AIMessage(content=f"{name} {turn} a", id=f"{name}-{turn}-a"),
                    AIMessage(content=f"{name} {turn} b", id=f"{name}-{turn}-b"),
                ]
            }

        return run

    builder: Any = StateGraph(State)
    for name, delay in (("zeta", 0.0), ("alpha", 0.02), ("mid", 0.01)):
        builder.add_node(name, node(name, delay))
        builder.add_edge(START, name)
        builder.add_edge(name, END)
    return builder.compile(checkpointer=saver)


def human(turn: int, tag: str = "") -> dict[str, Any]:
    return {"messages": [HumanMessage(content=f"hello {tag}{turn}", id=f"h{tag}{turn}")]}


def thread(thread_id: str, **extra: Any) -> RunnableConfig:
    return {"configurable": {"thread_id": thread_id}, **extra}  # type: ignore[typeddict-item]


# -- runners: one scenario, sync and async ------------------------------------------------------
class Runner:
    mode = ""

    def __init__(self, url: str, prefix: str) -> None:
        self.url, self.prefix = url, prefix
        self._opened: list[Saver] = []
        self.saver = self.open_saver()

    def open_saver(self) -> Saver:
        raise NotImplementedError

    async def close(self) -> None:
        raise NotImplementedError

    async def invoke(self, graph: Graph, value: Any, config: RunnableConfig) -> Any:
        raise NotImplementedError

    async def values(self, graph: Graph, config: RunnableConfig) -> Any:
        """The state at ``config`` as ``get_state`` rebuilds it."""
        raise NotImplementedError

    async def history(
        self, saver: Saver, config: RunnableConfig, channels: Sequence[str]
    ) -> Mapping[str, DeltaChannelHistory]:
        raise NotImplementedError

    async def base_history(
        self, saver: Saver, config: RunnableConfig, channels: Sequence[str]
    ) -> Mapping[str, DeltaChannelHistory]:
        """LangGraph's default implementation (a get_tuple per ancestor) on the same saver."""
        raise NotImplementedError

    async def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        raise NotImplementedError

    async def checkpoints(self, config: RunnableConfig) -> list[CheckpointTuple]:
        raise NotImplementedError

    async def copy_thread(self, source: str, target: str) -> None:
        raise NotImplementedError

    async def prune(self, thread_ids: Sequence[str]) -> None:
        raise NotImplementedError

    async def delete_for_runs(self, run_ids: Sequence[str]) -> None:
        raise NotImplementedError


class SyncRunner(Runner):
    mode = "sync"

    def open_saver(self) -> RedisSaver:
        saver = RedisSaver(self.url, prefix=self.prefix)
        self._opened.append(saver)
        return saver

    async def close(self) -> None:
        for saver in self._opened:
            assert isinstance(saver, RedisSaver)
            saver.close()

    async def invoke(self, graph: Graph, value: Any, config: RunnableConfig) -> Any:
        return graph.invoke(value, config)

    async def values(self, graph: Graph, config: RunnableConfig) -> Any:
        return graph.get_state(config).values

    async def history(
        self, saver: Saver, config: RunnableConfig, channels: Sequence[str]
    ) -> Mapping[str, DeltaChannelHistory]:
        return saver.get_delta_channel_history(config=config, channels=channels)

    async def base_history(
        self, saver: Saver, config: RunnableConfig, channels: Sequence[str]
    ) -> Mapping[str, DeltaChannelHistory]:
        return BaseCheckpointSaver.get_delta_channel_history(
            saver, config=config, channels=channels
        )

    async def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        return self.saver.get_tuple(config)

    async def checkpoints(self, config: RunnableConfig) -> list[CheckpointTuple]:
        return list(self.saver.list(config))

    async def copy_thread(self, source: str, target: str) -> None:
        self.saver.copy_thread(source, target)

    async def prune(self, thread_ids: Sequence[str]) -> None:
        self.saver.prune(thread_ids)

    async def delete_for_runs(self, run_ids: Sequence[str]) -> None:
        self.saver.delete_for_runs(run_ids)


class AsyncRunner(Runner):
    mode = "async"

    def open_saver(self) -> AsyncRedisSaver:
        saver = AsyncRedisSaver(self.url, prefix=self.prefix)
        self._opened.append(saver)
        return saver

    async def close(self) -> None:
        for saver in self._opened:
            assert isinstance(saver, AsyncRedisSaver)
            await saver.aclose()

    async def invoke(self, graph: Graph, value: Any, config: RunnableConfig) -> Any:
        return await graph.ainvoke(value, config)

    async def values(self, graph: Graph, config: RunnableConfig) -> Any:
        return (await graph.aget_state(config)).values

    async def history(
        self, saver: Saver, config: RunnableConfig, channels: Sequence[str]
    ) -> Mapping[str, DeltaChannelHistory]:
        return await saver.aget_delta_channel_history(config=config, channels=channels)

    async def base_history(
        self, saver: Saver, config: RunnableConfig, channels: Sequence[str]
    ) -> Mapping[str, DeltaChannelHistory]:
        return await BaseCheckpointSaver.aget_delta_channel_history(
            saver, config=config, channels=channels
        )

    async def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        return await self.saver.aget_tuple(config)

    async def checkpoints(self, config: RunnableConfig) -> list[CheckpointTuple]:
        return [t async for t in self.saver.alist(config)]

    async def copy_thread(self, source: str, target: str) -> None:
        await self.saver.acopy_thread(source, target)

    async def prune(self, thread_ids: Sequence[str]) -> None:
        await self.saver.aprune(thread_ids)

    async def delete_for_runs(self, run_ids: Sequence[str]) -> None:
        await self.saver.adelete_for_runs(run_ids)


@pytest.fixture(params=[SyncRunner, AsyncRunner], ids=["sync", "async"])
async def runner(
    request: pytest.FixtureRequest, server_url: str, prefix: str
) -> AsyncIterator[Runner]:
    r: Runner = request.param(server_url, prefix)
    try:
        yield r
    finally:
        await r.close()


async def latest_config(runner: Runner, thread_id: str) -> RunnableConfig:
    tup = await runner.get_tuple(thread(thread_id))
    assert tup is not None
    return tup.config


async def chat(
    runner: Runner, graph: Graph, thread_id: str, turns: range, tag: str = ""
) -> list[tuple[RunnableConfig, Any]]:
    """Run the turns live; per turn, the config of its last checkpoint and the values the run
    returned."""
    recorded = []
    for turn in turns:
        live = await runner.invoke(graph, human(turn, tag), thread(thread_id))
        recorded.append((await latest_config(runner, thread_id), live))
    return recorded


async def assert_rebuilt(
    runner: Runner, recorded: Sequence[tuple[RunnableConfig, Any]], snapshot_frequency: int
) -> None:
    """A brand-new saver rebuilds every recorded checkpoint to the values of the live run."""
    fresh = chat_graph(runner.open_saver(), snapshot_frequency)
    for config, live in recorded:
        assert await runner.values(fresh, config) == live


# -- scenarios ------------------------------------------------------------------------------------
@pytest.mark.slow
async def test_sixty_turns_rebuild_exactly_at_every_checkpoint(
    runner: Runner, monkeypatch: pytest.MonkeyPatch
) -> None:
    graph = chat_graph(runner.saver, snapshot_frequency=7)
    recorded = await chat(runner, graph, "t", range(60))
    assert len(recorded[-1][1]["messages"]) > 100

    # the live values, read back at every turn's checkpoint by a brand-new saver
    await assert_rebuilt(runner, recorded, 7)

    # at every checkpoint (not only the turns' last): the one-call walk equals LangGraph's
    # default walk (a get_tuple per ancestor), on a brand-new saver
    fresh = runner.open_saver()
    checkpoints = await runner.checkpoints(thread("t"))
    assert len(checkpoints) == 3 * 60
    seeded = replayed = 0
    for tup in checkpoints:
        ours = await runner.history(fresh, tup.config, ["messages", "no-such-channel"])
        assert ours == await runner.base_history(fresh, tup.config, ["messages", "no-such-channel"])
        assert ours["no-such-channel"] == {"writes": []}
        seeded += "seed" in ours["messages"]
        replayed += len(ours["messages"]["writes"])
    assert seeded > 100 and replayed > 300  # snapshots every 7 updates: both paths are taken

    # turn 60: one round trip for the whole walk, same result as the default implementation
    config = recorded[-1][0]
    round_trips = RoundTrips(monkeypatch)
    ours = await runner.history(runner.saver, config, ["messages"])
    assert round_trips.count == 1
    monkeypatch.undo()
    assert ours == await runner.base_history(runner.saver, config, ["messages"])
    assert ours["messages"]["writes"] and "seed" in ours["messages"]


async def test_parallel_writers_rebuild_in_live_order(runner: Runner) -> None:
    graph = fan_out_graph(runner.saver)
    reference = fan_out_graph(InMemorySaver())
    recorded = []
    for turn in range(6):
        live = await runner.invoke(graph, human(turn), thread("t"))
        assert live == reference.invoke(human(turn), thread("t"))  # the order LangGraph applies
        recorded.append((await latest_config(runner, "t"), live))
    # writes were applied by task path, not by name nor by finishing time
    names = [m.id.split("-")[0] for m in recorded[0][1]["messages"][1:]]
    assert names == ["alpha", "alpha", "mid", "mid", "zeta", "zeta"]

    fresh = fan_out_graph(runner.open_saver())
    for config, live in recorded:
        assert await runner.values(fresh, config) == live
        ours = await runner.history(runner.saver, config, ["messages"])
        assert ours == await runner.base_history(runner.saver, config, ["messages"])


async def test_fork_keeps_both_branches_exact(runner: Runner) -> None:
    graph = chat_graph(runner.saver, snapshot_frequency=5)
    main = await chat(runner, graph, "t", range(20))

    # fork from the checkpoint of turn 8, and go on there for a few turns
    fork: list[tuple[RunnableConfig, Any]] = []
    config = main[8][0]
    for turn in range(5):
        live = await runner.invoke(graph, human(turn, "fork-"), config)
        config = await latest_config(runner, "t")
        fork.append((config, live))
    assert fork[0][1]["messages"][: len(main[8][1]["messages"])] == main[8][1]["messages"]
    assert fork[-1][1]["messages"] != main[-1][1]["messages"]

    await assert_rebuilt(runner, main + fork, 5)
    # the latest of the thread is now the fork's head, and the main branch goes on from its own
    recorded = await chat(runner, graph, "t", range(20, 23))
    assert recorded[0][1]["messages"][:-2] == fork[-1][1]["messages"]
    more_main = []
    config = main[-1][0]
    for turn in range(20, 22):
        live = await runner.invoke(graph, human(turn, "main-"), config)
        config = await latest_config(runner, "t")
        more_main.append((config, live))
    assert more_main[0][1]["messages"][:-2] == main[-1][1]["messages"]
    await assert_rebuilt(runner, main + fork + recorded + more_main, 5)


async def test_copy_thread_carries_the_delta_chain(runner: Runner) -> None:
    graph = chat_graph(runner.saver, snapshot_frequency=6)
    recorded = await chat(runner, graph, "source", range(25))
    await runner.copy_thread("source", "copy")

    fresh = chat_graph(runner.open_saver(), 6)
    assert await runner.values(fresh, thread("copy")) == recorded[-1][1]
    copied = await runner.checkpoints(thread("copy"))
    assert len(copied) == len(await runner.checkpoints(thread("source")))
    for config, live in recorded:  # every turn, at the same checkpoint id in the copy
        assert await runner.values(fresh, at("copy", config)) == live

    # the copy goes on exactly as the source does
    on_source = await chat(runner, graph, "source", range(25, 29))
    on_copy = await chat(runner, graph, "copy", range(25, 29))
    assert [live for _, live in on_copy] == [live for _, live in on_source]
    await assert_rebuilt(runner, on_copy, 6)


async def test_prune_keep_latest_keeps_what_the_latest_needs(
    runner: Runner, client: redis.Redis
) -> None:
    graph = chat_graph(runner.saver, snapshot_frequency=7)
    recorded = await chat(runner, graph, "pruned", range(30))
    twin = await chat(runner, graph, "twin", range(30))
    assert [live for _, live in twin] == [live for _, live in recorded]
    before = len(await runner.checkpoints(thread("pruned")))

    await runner.prune(["pruned"])
    kept = await runner.checkpoints(thread("pruned"))
    assert 1 < len(kept) < before
    assert kept[0].config == recorded[-1][0]
    # what is kept is exactly the stretch the latest checkpoint is rebuilt from: its parent
    # chain back to the ancestor holding the snapshot of messages
    assert "messages" not in kept[0].checkpoint["channel_values"]
    assert "messages" in kept[-1].checkpoint["channel_values"]
    assert all("messages" not in t.checkpoint["channel_values"] for t in kept[:-1])
    assert [t.parent_config for t in kept[:-1]] == [t.config for t in kept[1:]]

    assert (
        await runner.values(chat_graph(runner.open_saver(), 7), thread("pruned"))
        == (recorded[-1][1])
    )
    # and the conversation goes on as on the unpruned twin
    on_pruned = await chat(runner, graph, "pruned", range(30, 33))
    on_twin = await chat(runner, graph, "twin", range(30, 33))
    assert [live for _, live in on_pruned] == [live for _, live in on_twin]
    await assert_rebuilt(runner, on_pruned, 7)

    # pruning again after the latest snapshotted: only it is left
    snapshot_graph = chat_graph(runner.saver, snapshot_frequency=1)
    await chat(runner, snapshot_graph, "snapshots", range(5))
    await runner.prune(["snapshots"])
    assert len(await runner.checkpoints(thread("snapshots"))) == 1
    schema = KeySchema(runner.prefix)
    assert len(keys_of(client, schema.prefix + ":cp:" + schema.tag("snapshots") + ":*")) == 1


async def test_delete_for_runs_keeps_what_remaining_checkpoints_need(runner: Runner) -> None:
    graph = chat_graph(runner.saver, snapshot_frequency=100)  # no snapshot: every read replays
    recorded = []
    for turn in range(6):
        # LangGraph copies a run_id in the configurable into the checkpoint metadata
        config: RunnableConfig = {"configurable": {"thread_id": "t", "run_id": f"run-{turn}"}}
        live = await runner.invoke(graph, human(turn), config)
        recorded.append((await latest_config(runner, "t"), live))
    by_run: dict[str, list[RunnableConfig]] = {}
    for tup in await runner.checkpoints(thread("t")):
        by_run.setdefault(tup.metadata["run_id"], []).append(tup.config)
    assert len(by_run) == 6
    runs = sorted(by_run)

    # the last run: nothing depends on it, so all of it goes
    await runner.delete_for_runs([runs[5]])
    assert len(await runner.checkpoints(thread("t"))) == 5 * 3
    assert (await latest_config(runner, "t")) == recorded[4][0]

    # a run in the middle: the later checkpoints rebuild messages from its writes, so the
    # checkpoints holding them stay, and every remaining checkpoint rebuilds as before
    await runner.delete_for_runs([runs[2]])
    remaining = {t.checkpoint["id"] for t in await runner.checkpoints(thread("t"))}
    assert {c["configurable"]["checkpoint_id"] for c in by_run[runs[2]]} & remaining
    await assert_rebuilt(runner, recorded[:5], 100)

    # once nothing depends on them, the same call removes them
    await runner.delete_for_runs([runs[3], runs[4]])
    await runner.delete_for_runs([runs[2]])
    assert len(await runner.checkpoints(thread("t"))) == 2 * 3
    await assert_rebuilt(runner, recorded[:2], 100)


async def test_walk_goes_on_past_the_budget(
    runner: Runner, monkeypatch: pytest.MonkeyPatch
) -> None:
    graph = chat_graph(runner.saver, snapshot_frequency=1000)
    recorded = await chat(runner, graph, "t", range(8))
    set_limits(monkeypatch, runner.saver, history_budget=4)
    config = recorded[-1][0]
    round_trips = RoundTrips(monkeypatch)
    ours = await runner.history(runner.saver, config, ["messages"])
    assert round_trips.count == -(-(8 * 3 - 1) // 4)  # 23 ancestors, 4 per call
    assert ours == await runner.base_history(runner.saver, config, ["messages"])
    assert len(ours["messages"]["writes"]) == 8 * 2
    await assert_rebuilt(runner, recorded, 1000)


@pytest.mark.parametrize("refresh_on_read", [False, True])
def test_chain_outlives_the_ttl_while_the_thread_is_in_use(
    server_url: str, prefix: str, refresh_on_read: bool
) -> None:
    """Each checkpoint's keys expire ttl after they were written; the chain a DeltaChannel is
    rebuilt from is older than that, and must not expire while the thread is in use."""
    ttl = {"default_ttl": 1 / 60, "refresh_on_read": refresh_on_read}  # 1 second
    with RedisSaver(server_url, prefix=prefix, ttl=ttl) as saver:
        graph = chat_graph(saver, snapshot_frequency=100)
        reference = chat_graph(InMemorySaver(), snapshot_frequency=100)
        for turn in range(6):
            live = graph.invoke(human(turn), thread("t"))
            assert live == reference.invoke(human(turn), thread("t"))
            time.sleep(0.4)
        assert graph.get_state(thread("t")).values == live
        time.sleep(2.5)  # idle: then all of it expires
        assert saver.get_tuple(thread("t")) is None


async def test_history_edge_cases(runner: Runner) -> None:
    assert await runner.history(runner.saver, thread("nothing"), ["messages"]) == {
        "messages": {"writes": []}
    }
    assert await runner.history(runner.saver, thread("nothing"), []) == {}
    graph = chat_graph(runner.saver, snapshot_frequency=3)
    recorded = await chat(runner, graph, "t", range(3))
    config = recorded[-1][0]
    twice = await runner.history(runner.saver, config, ["messages", "messages"])
    assert twice == await runner.base_history(runner.saver, config, ["messages"])
    missing: RunnableConfig = {"configurable": {"thread_id": "t", "checkpoint_id": "not-there"}}
    assert await runner.history(runner.saver, missing, ["messages"]) == {"messages": {"writes": []}}


def test_hand_written_chain_with_awkward_names(saver: RedisSaver, client: redis.Redis) -> None:
    """Channel names with the key separator, a blob-ref separator and non-ASCII; writes from
    several tasks in an order that differs from the stored one; seeds at different depths."""
    odd, never, twice = "a:b", "ü ch", "x,y"
    ns = "sub:ns|1"
    ids = [f"cp-{i:02d}" for i in range(6)]
    stored_at = {ids[0]: {twice: "x0"}, ids[1]: {odd: "seed-a"}, ids[3]: {twice: "x3"}}
    parent = ""
    for i, checkpoint_id in enumerate(ids):
        values = stored_at.get(checkpoint_id, {})
        checkpoint = empty_checkpoint()
        checkpoint["id"] = checkpoint_id
        checkpoint["channel_values"] = dict(values)
        checkpoint["channel_versions"] = {c: f"{i}.{c}" for c in (odd, never, twice)}
        config: RunnableConfig = {
            "configurable": {"thread_id": "t", "checkpoint_ns": ns, "checkpoint_id": parent}
        }
        saved = saver.put(config, checkpoint, {"step": i}, {c: f"{i}.{c}" for c in values})
        for task, path in (("task-z", "~a"), ("task-a", "~b"), ("task-m", "")):
            writes = [(odd, f"{task}-{i}-1"), (never, f"{task}-{i}"), (odd, f"{task}-{i}-2")]
            saver.put_writes(saved, [*writes, (twice, i), ("__error__", "boom")], task, path)
        parent = checkpoint_id

    channels = [odd, never, twice, "nope"]
    for checkpoint_id in ids:
        config = {"configurable": {"thread_id": "t", "checkpoint_ns": ns}}
        config["configurable"]["checkpoint_id"] = checkpoint_id
        ours = saver.get_delta_channel_history(config=config, channels=channels)
        assert ours == BaseCheckpointSaver.get_delta_channel_history(
            saver, config=config, channels=channels
        )
    latest: RunnableConfig = {"configurable": {"thread_id": "t", "checkpoint_ns": ns}}
    ours = saver.get_delta_channel_history(config=latest, channels=channels)
    assert ours[odd]["seed"] == "seed-a" and ours[twice]["seed"] == "x3"
    assert "seed" not in ours[never] and ours["nope"] == {"writes": []}
    # oldest first; within a checkpoint by (task_path, task_id, idx): "" < "~a" < "~b"
    assert [w[2] for w in ours[odd]["writes"][:6]] == [
        "task-m-1-1",
        "task-m-1-2",
        "task-z-1-1",
        "task-z-1-2",
        "task-a-1-1",
        "task-a-1-2",
    ]
    assert len(ours[odd]["writes"]) == 4 * 6 and len(ours[never]["writes"]) == 5 * 3
    assert [w[2] for w in ours[twice]["writes"]] == [3] * 3 + [4] * 3

    # a seed whose blob is gone is no seed: the walk goes on to the next stored value
    schema = KeySchema(saver.prefix)
    client.unlink(schema.blob(schema.tag("t"), ns, twice, f"3.{twice}"))
    ours = saver.get_delta_channel_history(config=latest, channels=[twice])
    assert ours[twice]["seed"] == "x0"
    assert [w[2] for w in ours[twice]["writes"]] == [0] * 3 + [1] * 3 + [2] * 3 + [3] * 3 + [4] * 3


def at(thread_id: str, config: RunnableConfig) -> RunnableConfig:
    """The checkpoint of ``config`` (same id and namespace) in another thread."""
    return {"configurable": {**config["configurable"], "thread_id": thread_id}}
