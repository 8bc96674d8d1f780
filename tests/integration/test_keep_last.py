"""keep_last: the newest N checkpoints of each namespace stay, trimmed by the put itself, with
their writes and the blobs only they used; delta chains a kept checkpoint needs stay too."""

from __future__ import annotations

import operator
from typing import Annotated, Any, TypedDict, cast

import pytest
import redis
from langchain_core.messages import AIMessage, AnyMessage
from langgraph.channels.delta import DeltaChannel
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import _messages_delta_reducer

from langgraph.checkpoint.rediskv import AsyncRedisSaver, RedisSaver
from langgraph.checkpoint.rediskv.keys import KeySchema

from ..conftest import data_keys, keys_of
from .test_contract import cfg, make_checkpoint
from .test_delta import chat_graph, human, thread


def put_chain(
    saver: RedisSaver, thread_id: str, n: int, parent: str | None = None, ns: str = ""
) -> list[str]:
    """n checkpoints, each the child of the one before; each changes channel "turn" and, every
    third one, "notes" (so blobs are shared between neighbours). Returns their ids."""
    ids: list[str] = []
    versions: dict[str, Any] = {}
    values: dict[str, Any] = {}
    for k in range(n):
        changed = ["turn"] + (["notes"] if k % 3 == 0 else [])
        new = {c: saver.get_next_version(versions.get(c), None) for c in changed}
        versions |= new
        values |= {"turn": k, **({"notes": f"note {k} " * 20} if "notes" in changed else {})}
        checkpoint = make_checkpoint(values, versions)
        config = saver.put(
            cfg(thread_id, ns, parent), checkpoint, {"source": "loop", "step": k}, new
        )
        saver.put_writes(config, [("turn", k + 1)], f"task-{k}")
        parent = checkpoint["id"]
        ids.append(parent)
    return ids


def expected_keys(saver: RedisSaver, thread_id: str, kept: list[str], ns: str = "") -> set[str]:
    """The keys a thread holds when exactly `kept` (with one write each, stored after it, so
    in its record) remain; its deadline ledger holds exactly their entries."""
    keys = saver._core.keys
    tag = keys.tag(thread_id)
    out = {keys.thread(tag), keys.index(tag, ns), keys.thread_values(tag), keys.ledger(tag, ns)}
    ledger = saver.client.hkeys(keys.ledger(tag, ns))
    assert sorted(ledger) == sorted(k.encode() for k in kept)
    for checkpoint_id in kept:
        out.add(keys.checkpoint(tag, ns, checkpoint_id))
        tup = saver.get_tuple(cfg(thread_id, ns, checkpoint_id))
        assert tup is not None
        for channel, version in tup.checkpoint["channel_versions"].items():
            out.add(keys.blob(tag, ns, channel, version))
    return out


def thread_keys(client: redis.Redis, saver: RedisSaver, thread_id: str) -> set[str]:
    tag = saver._core.keys.tag(thread_id)
    return {k for k in data_keys(client, saver.prefix) if tag in k}


@pytest.mark.parametrize("keep", [1, 2, 3, 8, 9])
def test_only_the_newest_checkpoints_stay_with_their_writes_and_blobs(
    server_url: str, prefix: str, client: redis.Redis, keep: int
) -> None:
    with RedisSaver(server_url, prefix=prefix, keep_last=keep) as saver:
        ids = put_chain(saver, "t", 30)
        listed = [t.checkpoint["id"] for t in saver.list(cfg("t"))]
        assert listed == ids[::-1][:keep]
        assert saver.get_tuple(cfg("t", checkpoint_id=ids[-keep - 1])) is None
        latest = saver.get_tuple(cfg("t"))
        assert latest is not None
        assert latest.checkpoint["channel_values"] == {"turn": 29, "notes": "note 27 " * 20}
        assert [w[1:] for w in latest.pending_writes or []] == [("turn", 30)]
        assert thread_keys(client, saver, "t") == expected_keys(saver, "t", ids[-keep:])
        # the run-less metadata indexes hold the kept checkpoints only
        assert [t.checkpoint["id"] for t in saver.list(None, filter={"source": "loop"})] == (
            ids[::-1][:keep]
        )
        assert saver.check_invariants() == []


def test_writes_that_arrive_after_their_checkpoint_was_trimmed_are_dropped(
    server_url: str, prefix: str, client: redis.Redis
) -> None:
    with RedisSaver(server_url, prefix=prefix, keep_last=1) as saver:
        ids = put_chain(saver, "t", 3)
        saver.put_writes(cfg("t", checkpoint_id=ids[0]), [("turn", 99)], "late")
        assert thread_keys(client, saver, "t") == expected_keys(saver, "t", ids[-1:])
        assert saver.check_invariants() == []
    # without keep_last they are stored as ever (a thread may be written by both)
    with RedisSaver(server_url, prefix=prefix) as saver:
        saver.put_writes(cfg("t", checkpoint_id=ids[0]), [("turn", 99)], "late")
        assert saver._core.keys.writes(saver._core.keys.tag("t"), "", ids[0]) in set(
            data_keys(client, prefix)
        )


def test_turned_on_for_a_long_thread_it_shrinks_a_few_per_put(
    server_url: str, prefix: str, client: redis.Redis
) -> None:
    with RedisSaver(server_url, prefix=prefix) as saver:
        ids = put_chain(saver, "t", 40)
    with RedisSaver(server_url, prefix=prefix, keep_last=2) as saver:
        more = put_chain(saver, "t", 1, parent=ids[-1])
        assert len(list(saver.list(cfg("t")))) == 41 - 8  # 8 trimmed per put at most
        for _ in range(5):
            more += put_chain(saver, "t", 1, parent=more[-1])
            assert saver.check_invariants() == []
        assert [t.checkpoint["id"] for t in saver.list(cfg("t"))] == more[::-1][:2]
        # blobs parked while the thread was shrinking go a few per put, once it has
        for _ in range(20):
            more += put_chain(saver, "t", 1, parent=more[-1])
        assert thread_keys(client, saver, "t") == expected_keys(saver, "t", more[-2:])
        assert saver.check_invariants() == []


def test_a_fork_and_other_namespaces_are_trimmed_by_id_order(
    server_url: str, prefix: str, client: redis.Redis
) -> None:
    with RedisSaver(server_url, prefix=prefix, keep_last=2) as saver:
        main = put_chain(saver, "t", 5)
        fork = put_chain(saver, "t", 1, parent=main[2])  # newest: it and main[4] stay
        sub = put_chain(saver, "t", 4, ns="child")
        assert [t.checkpoint["id"] for t in saver.list(cfg("t"))] == [fork[0], main[4]]
        assert [t.checkpoint["id"] for t in saver.list(cfg("t", "child"))] == sub[::-1][:2]
        for checkpoint_id in (fork[0], main[4]):
            tup = saver.get_tuple(cfg("t", checkpoint_id=checkpoint_id))
            assert tup is not None and set(tup.checkpoint["channel_values"]) == {"turn", "notes"}
        kept = expected_keys(saver, "t", [main[4], fork[0]])
        assert thread_keys(client, saver, "t") == kept | expected_keys(saver, "t", sub[2:], "child")
        assert saver.check_invariants() == []


def test_a_thread_written_by_savers_with_and_without_it_loses_no_value(
    server_url: str, prefix: str
) -> None:
    with (
        RedisSaver(server_url, prefix=prefix) as plain,
        RedisSaver(server_url, prefix=prefix, keep_last=3) as shallow,
    ):
        parent = None
        for k in range(12):
            saver = shallow if k % 2 else plain
            parent = put_chain(saver, "t", 1, parent=parent)[0]
        for tup in plain.list(cfg("t")):
            full = plain.get_tuple(tup.config)
            assert full is not None and set(full.checkpoint["channel_values"]) == {"turn", "notes"}
        assert plain.check_invariants() == []


async def test_the_async_saver_trims_too(server_url: str, prefix: str) -> None:
    async with AsyncRedisSaver(server_url, prefix=prefix, keep_last=1) as saver:
        parent = None
        for k in range(5):
            checkpoint = make_checkpoint({"turn": k}, {"turn": str(k + 1)})
            await saver.aput(cfg("t", checkpoint_id=parent), checkpoint, {}, {"turn": str(k + 1)})
            parent = checkpoint["id"]
        assert [t.checkpoint["id"] async for t in saver.alist(cfg("t"))] == [parent]


@pytest.mark.parametrize("bad", [0, -1, 2.0, "1", True])
def test_a_bad_keep_last_is_refused(server_url: str, bad: Any) -> None:
    with pytest.raises(ValueError, match=r"invalid keep_last .*1 or more"):
        RedisSaver(server_url, keep_last=bad)


@pytest.mark.slow
@pytest.mark.parametrize("snapshot_frequency", [1, 4, 7])
def test_delta_channels_rebuild_exactly_with_keep_last_1(
    server_url: str, prefix: str, client: redis.Redis, snapshot_frequency: int
) -> None:
    reference = chat_graph(InMemorySaver(), snapshot_frequency)
    with RedisSaver(server_url, prefix=prefix, keep_last=1) as saver:
        graph = chat_graph(saver, snapshot_frequency)
        schema = KeySchema(prefix)
        stored = []
        for turn in range(40):
            live = graph.invoke(human(turn), thread("t"))
            assert live == reference.invoke(human(turn), thread("t"))
            stored.append(len(keys_of(client, f"{prefix}:cp:{schema.tag('t')}:*")))
            # a brand-new saver rebuilds the same states from what is kept: the newest, and
            # older ones kept for its delta chain that hold their own (the others are hidden)
            history = reference.get_state_history(thread("t"))
            expected = {s.metadata["step"]: s.values for s in history}
            with RedisSaver(server_url, prefix=prefix) as fresh:
                fresh_graph = chat_graph(fresh, snapshot_frequency)
                assert fresh_graph.get_state(thread("t")).values == live
                listed = {
                    s.metadata["step"]: s.values for s in fresh_graph.get_state_history(thread("t"))
                }
            assert max(listed) == max(expected)
            assert listed == {step: expected[step] for step in listed}
        # what stays is the latest checkpoint and the chain back to its seed: bounded by the
        # snapshot frequency (3 checkpoints per turn), not by the length of the conversation
        assert max(stored[10:]) <= 3 * snapshot_frequency + 3
        assert saver.check_invariants() == []


# -- delta channels in combination (found by review) ---------------------------------------
def two_delta_graph(saver: Any, fa: int, fb: int) -> Any:
    """Two DeltaChannels snapshotted at different steps; b is written every other turn."""

    def add(a: Any, b: Any) -> Any:
        return (a or []) + [x for w in b for x in w]

    a_channel: DeltaChannel[Any] = DeltaChannel(cast(Any, add), snapshot_frequency=fa)
    b_channel: DeltaChannel[Any] = DeltaChannel(cast(Any, add), snapshot_frequency=fb)
    State = TypedDict(  # noqa: UP013
        "State", {"a": Annotated[list, a_channel], "b": Annotated[list, b_channel], "turn": int}
    )

    def one(s: Any) -> dict[str, Any]:
        out = {"a": [f"a{s['turn']}"]}
        if s["turn"] % 2 == 0:
            out["b"] = [f"b{s['turn']}"]
        return out

    def two(s: Any) -> dict[str, Any]:
        return {"a": [f"a2-{s['turn']}"]} if s["turn"] % 3 == 0 else {"b": [f"b2-{s['turn']}"]}

    builder: Any = StateGraph(State)
    builder.add_node("one", one)
    builder.add_node("two", two)
    builder.add_edge(START, "one")
    builder.add_edge("one", "two")
    builder.add_edge("two", END)
    return builder.compile(checkpointer=saver)


@pytest.mark.parametrize("keep", [1, 2, 3])
@pytest.mark.parametrize(("fa", "fb"), [(2, 3), (3, 5), (1, 4)])
def test_staggered_delta_snapshots_list_only_exact_states(
    server_url: str, prefix: str, keep: int, fa: int, fb: int
) -> None:
    """A checkpoint kept for the delta chain of newer ones may need seeds that go: it is
    hidden once it leaves the window. Everything listed reads back as InMemorySaver has it."""
    reference = two_delta_graph(InMemorySaver(), fa, fb)
    config: Any = {"configurable": {"thread_id": "t"}}
    with RedisSaver(server_url, prefix=prefix, keep_last=keep) as saver:
        graph = two_delta_graph(saver, fa, fb)
        for turn in range(25):
            assert graph.invoke({"turn": turn}, config) == reference.invoke({"turn": turn}, config)
            expected = {s.metadata["step"]: s.values for s in reference.get_state_history(config)}
            with RedisSaver(server_url, prefix=prefix) as fresh:
                listed = list(two_delta_graph(fresh, fa, fb).get_state_history(config))
            assert [s.metadata["step"] for s in listed[:keep]] == sorted(expected)[::-1][:keep]
            assert {s.metadata["step"]: s.values for s in listed} == {
                s.metadata["step"]: expected[s.metadata["step"]] for s in listed
            }
        assert len(listed) <= keep + 6  # bounded: hidden ones are trimmed with the chain
        assert saver.check_invariants() == []


def test_a_delta_channel_never_written_does_not_stop_the_trimming(
    server_url: str, prefix: str
) -> None:
    """LangGraph lists an unwritten DeltaChannel as unsnapshotted at every checkpoint and never
    snapshots it: it needs no ancestor, and the history stays bounded."""
    messages: DeltaChannel[Any] = DeltaChannel(
        cast(Any, _messages_delta_reducer), snapshot_frequency=2
    )
    notes: DeltaChannel[Any] = DeltaChannel(cast(Any, operator.add), snapshot_frequency=2)
    State = TypedDict(  # noqa: UP013
        "State",
        {"messages": Annotated[list[AnyMessage], messages], "notes": Annotated[list, notes]},
    )

    def bot(state: Any) -> dict[str, Any]:
        last = state["messages"][-1]
        return {"messages": [AIMessage(content=f"re: {last.content}", id=f"ai-{last.id}")]}

    builder: Any = StateGraph(State)
    builder.add_node("bot", bot)
    builder.add_edge(START, "bot")
    builder.add_edge("bot", END)
    reference = builder.compile(checkpointer=InMemorySaver())
    with RedisSaver(server_url, prefix=prefix, keep_last=1) as saver:
        graph = builder.compile(checkpointer=saver)
        for turn in range(20):
            assert graph.invoke(human(turn), thread("t")) == reference.invoke(
                human(turn), thread("t")
            )
        assert len(list(saver.list(cfg("t")))) == 1
        assert len(saver._core.keys.tag("t")) > 0
        assert saver.check_invariants() == []


@pytest.mark.parametrize("keep", [6, 8])
def test_turned_on_for_a_thread_with_delta_history_the_window_stays_exact(
    server_url: str, prefix: str, keep: int
) -> None:
    """Checkpoints written without keep_last have no delta seeds recorded: they count as
    unknown, and nothing they may need is trimmed."""
    with RedisSaver(server_url, prefix=prefix) as plain:
        graph = chat_graph(plain, 2)
        for turn in range(5):
            graph.invoke(human(turn), thread("t"))
        before = {
            s.config["configurable"]["checkpoint_id"]: s.values
            for s in graph.get_state_history(thread("t"))
        }
    with RedisSaver(server_url, prefix=prefix, keep_last=keep) as shallow:
        chat_graph(shallow, 2).invoke(human(5), thread("t"))
    with RedisSaver(server_url, prefix=prefix) as fresh:
        after = {
            s.config["configurable"]["checkpoint_id"]: s.values
            for s in chat_graph(fresh, 2).get_state_history(thread("t"))
        }
        old = [i for i in after if i in before]
        assert len(old) >= keep - 3  # the window holds older ones too
        assert {i: after[i] for i in old} == {i: before[i] for i in old}
        assert fresh.check_invariants() == []
