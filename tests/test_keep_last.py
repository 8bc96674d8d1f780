"""keep_last: the newest N checkpoints of each namespace stay, trimmed by the put itself, with
their writes and the blobs only they used; delta chains a kept checkpoint needs stay too."""

from __future__ import annotations

from typing import Any

import pytest
import redis
from langgraph.checkpoint.memory import InMemorySaver

from langgraph.checkpoint.rediskv import AsyncRedisSaver, RedisSaver
from langgraph.checkpoint.rediskv.keys import KeySchema

from .conftest import data_keys, keys_of
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
    """The keys a thread holds when exactly `kept` (with one write each) remain."""
    keys = saver._core.keys
    tag = keys.tag(thread_id)
    out = {keys.thread(tag), keys.index(tag, ns), keys.writes_index(tag, ns)}
    for checkpoint_id in kept:
        out.add(keys.checkpoint(tag, ns, checkpoint_id))
        out.add(keys.writes(tag, ns, checkpoint_id))
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
    with RedisSaver(server_url, prefix=prefix) as plain, RedisSaver(
        server_url, prefix=prefix, keep_last=3
    ) as shallow:
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


@pytest.mark.parametrize("snapshot_frequency", [1, 4, 7])
def test_delta_channels_rebuild_exactly_with_keep_last_1(
    server_url: str, prefix: str, client: redis.Redis, snapshot_frequency: int
) -> None:
    reference = chat_graph(InMemorySaver(), snapshot_frequency)
    with RedisSaver(server_url, prefix=prefix, keep_last=1) as saver:
        graph = chat_graph(saver, snapshot_frequency)
        sizes = []
        for turn in range(40):
            live = graph.invoke(human(turn), thread("t"))
            assert live == reference.invoke(human(turn), thread("t"))
            sizes.append(len(list(saver.list(cfg("t")))))
            # a brand-new saver rebuilds the same state from what is kept
            with RedisSaver(server_url, prefix=prefix) as fresh:
                assert chat_graph(fresh, snapshot_frequency).get_state(thread("t")).values == live
        # what stays is the latest checkpoint and the chain back to its seed: bounded by the
        # snapshot frequency (3 checkpoints per turn), not by the length of the conversation
        assert max(sizes[10:]) <= 3 * snapshot_frequency + 3
        assert min(sizes) >= 1
        schema = KeySchema(prefix)
        assert len(keys_of(client, f"{prefix}:cp:{schema.tag('t')}:*")) == sizes[-1]
        assert saver.check_invariants() == []
