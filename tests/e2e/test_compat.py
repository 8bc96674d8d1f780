"""Rolling upgrades and rollbacks: savers of the previous release (tests/compat/
previous_release, built from this repository's git history, run in a subprocess) and of this
one take turns on the same threads of real graphs (a chat, a chat with keep_last, an
interrupt, a subgraph that interrupts, a DeltaChannel chat; ttl and compression on), both
ways; each must read every thread as an InMemorySaver run of the same turns gives it, and
do the whole-thread operations (copy, prune, delete_for_runs, delete) on what the other
wrote, with check_invariants() clean for both. Needs the git history: without it the test
fails and says so."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from langgraph.checkpoint.memory import InMemorySaver

from langgraph.checkpoint.rediskv import RedisSaver
from langgraph.checkpoint.rediskv.keys import KeySchema

from ..compat.previous import HistoryMissing, OldSaver, installed_release, previous_release
from ..compat.scenario import TURNS, Runner, checkpoints, run_id
from ..conftest import keys_of
from ..integration.test_contract import cfg, chain, listed_ids, make_checkpoint

KEEP_LAST = 3
# checkpoints a prune keeps of a delta thread: the latest, and its ancestors back to the
# delta channel's snapshot (every 3 updates)
PRUNE_KEEPS_OF_DELTA = 4
# the two stores: ttl (refreshed on read) on every kind of graph, and keep_last on chats
STORES: dict[str, dict[str, Any]] = {
    "ttl": {"ttl": {"default_ttl": 60, "refresh_on_read": True}},
    "keep_last": {"keep_last": KEEP_LAST},
}
# the threads of each store: (kind, thread); thread ...-0 starts with the old release,
# ...-1 with the new one, and they alternate turn by turn
THREADS = {
    "ttl": [(kind, f"{kind}-{first}") for kind in TURNS for first in (0, 1)],
    "keep_last": [("chat", f"kept-{first}") for first in (0, 1)],
}


@pytest.fixture(scope="module")
def release_site() -> str:
    try:
        return str(installed_release())
    except HistoryMissing as exc:
        pytest.fail(str(exc))


class Pair:
    """An old and a new saver on one store, and what an InMemorySaver makes of each thread."""

    def __init__(self, url: str, prefix: str, options: dict[str, Any]) -> None:
        self.prefix, self.options = prefix, options
        self.old = OldSaver(url, prefix, options)
        self.new = RedisSaver(url, prefix=prefix, **options)
        self.new_runner = Runner(self.new)
        self.memory = Runner(InMemorySaver())

    def saver(self, old: bool) -> Any:
        return self.old if old else self.new

    def turn(self, old: bool, kind: str, thread: str, name: str, turn: int) -> None:
        if old:
            self.old.call("turn", kind, thread, name, turn)
        else:
            self.new_runner.turn(kind, thread, name, turn)

    def read(self, old: bool, kind: str, thread: str) -> dict[str, Any]:
        if old:
            return self.old.call("read", kind, thread)  # type: ignore[no-any-return]
        return self.new_runner.read(kind, thread)

    def checkpoints(self, old: bool, thread: str) -> list[tuple[str, str, Any]]:
        if old:
            return self.old.call("checkpoints", thread)  # type: ignore[no-any-return]
        return checkpoints(self.new, thread)

    def op(self, old: bool, name: str, *args: Any) -> Any:
        return self.old.call(name, *args) if old else getattr(self.new, name)(*args)

    def expected(self, kind: str, name: str, turns: int) -> dict[str, Any]:
        """The InMemorySaver's reading of conversation ``name`` after ``turns`` turns."""
        thread = f"{name}@{turns}"
        for turn in range(turns):
            self.memory.turn(kind, thread, name, turn)
        reading = self.memory.read(kind, thread)
        if self.options.get("keep_last"):
            reading["history"] = reading["history"][:KEEP_LAST]
        return reading

    def close(self) -> None:
        self.old.close()
        self.new.close()


@pytest.fixture
def pairs(release_site: str, server_url: str, prefix: str) -> Iterator[dict[str, Pair]]:
    made = {store: Pair(server_url, f"{prefix}-{store}", opts) for store, opts in STORES.items()}
    yield made
    for pair in made.values():
        pair.close()


def assert_reads(pair: Pair, kind: str, thread: str, expected: dict[str, Any]) -> None:
    for old in (True, False):
        assert pair.read(old, kind, thread) == expected, (thread, "old" if old else "new")


def test_the_previous_release_is_recorded_and_built(release_site: str) -> None:
    tag, sha = previous_release()
    assert (tag, len(sha)) == ("v0.1.0", 40)
    site = Path(release_site)
    assert (site / "COMPLETE").read_text().startswith(f"{tag} {sha} ")
    metadata = site / "langgraph_checkpoint_rediskv-0.1.0.dist-info" / "METADATA"
    assert metadata.read_text().count("\nVersion: 0.1.0\n") == 1


def test_old_and_new_releases_take_turns_on_the_same_threads(
    pairs: dict[str, Pair], client: redis.Redis
) -> None:
    # turns, alternating: the old release writes what the new one wrote, and the reverse
    expected: dict[str, dict[str, Any]] = {}
    for store, pair in pairs.items():
        for kind, thread in THREADS[store]:
            first_old = thread.endswith("-0")
            for turn in range(TURNS[kind]):
                pair.turn((turn % 2 == 0) == first_old, kind, thread, thread, turn)
            expected[thread] = pair.expected(kind, thread, TURNS[kind])
            assert_reads(pair, kind, thread, expected[thread])

    # ttl: every key of every thread expires, whoever wrote it
    ttl_pair = pairs["ttl"]
    keys = KeySchema(ttl_pair.prefix)
    for _, thread in THREADS["ttl"]:
        thread_keys = keys_of(client, keys.thread_keys_pattern(thread))
        assert thread_keys and [k for k in thread_keys if client.ttl(k) <= 0] == []
    # the new release writes 0.1.0's format, which needs no mark (0.1.0 knows no P:fmt)
    assert client.exists(keys.format_key()) == 0

    # copies each way, then a turn on the copy by the other release
    for old, source in ((True, "chat-0"), (False, "chat-1")):
        copy = f"{source}-copied-by-{'old' if old else 'new'}"
        ttl_pair.op(old, "copy_thread", source, copy)
        assert_reads(ttl_pair, "chat", copy, expected[source])
        ttl_pair.turn(not old, "chat", copy, source, TURNS["chat"])
        assert_reads(ttl_pair, "chat", copy, ttl_pair.expected("chat", source, TURNS["chat"] + 1))
    # delete_for_runs each way: the run's checkpoints go, the others stay as they were
    for old, thread, turn in ((True, "chat-0", 1), (False, "chat-1", 2)):
        before = ttl_pair.checkpoints(False, thread)
        ttl_pair.op(old, "delete_for_runs", [run_id(thread, turn)])
        left = [c for c in before if c[2] != run_id(thread, turn)]
        assert len(left) < len(before)
        assert ttl_pair.checkpoints(True, thread) == ttl_pair.checkpoints(False, thread) == left
    # prune each way: the latest state stays
    for old, pruned in ((True, ["ask-0", "delta-1", "nested-0"]), (False, ["ask-1", "delta-0"])):
        ttl_pair.op(old, "prune", pruned)
        for kind, thread in THREADS["ttl"]:
            if thread in pruned:
                for reader in (True, False):
                    reading = ttl_pair.read(reader, kind, thread)
                    assert reading["state"] == expected[thread]["state"], (thread, reader)
                    # a delta channel's latest checkpoint keeps its ancestors back to the
                    # channel's snapshot, which its value is rebuilt from
                    kept = PRUNE_KEEPS_OF_DELTA if kind == "delta" else 1
                    assert reading["history"] == expected[thread]["history"][:kept], thread
    # the other threads read as before
    for kind, thread in THREADS["ttl"]:
        if kind in ("ask", "delta") or thread in ("chat-0", "chat-1", "nested-0"):
            continue
        assert_reads(ttl_pair, kind, thread, expected[thread])
    # delete_thread each way: nothing of the thread is left but, after 0.1.0's delete, the
    # deadline ledger it does not know (lua/include/ledger.lua), which expires with the ttl
    # and leads no read astray: the thread reads as deleted
    for old, thread in ((True, "chat-1-copied-by-new"), (False, "chat-0-copied-by-old")):
        ttl_pair.op(old, "delete_thread", thread)
        left = keys_of(client, keys.thread_keys_pattern(thread))
        assert left == ([keys.ledger(keys.tag(thread), "")] if old else [])
        assert [k for k in left if client.ttl(k) <= 0] == []
        assert ttl_pair.old.call("get_tuple", thread) is None
        assert ttl_pair.new.get_tuple({"configurable": {"thread_id": thread}}) is None

    for pair in pairs.values():
        # 0.1.0 knows no deadline ledger: its check names each as a key no index leads to
        # (and its repair would delete them: harmless, the next put makes a ledger again)
        ledgers = keys_of(client, f"{pair.prefix}:dl:*")
        unknown = [
            "key not reachable from any index"
            + (", expiring" if client.ttl(k) > 0 else "")
            + f": {k}"
            for k in ledgers
        ]
        # nor the registry of live threads (a prefix with a ttl), which it only reports
        live_threads = KeySchema(pair.prefix).live_threads()
        if client.exists(live_threads):
            unknown.append(f"key outside the key schema: {live_threads}")
        assert sorted(pair.old.call("check_invariants")) == sorted(unknown)
        # this release names the one 0.1.0's delete left (expiring; a delete_thread of this
        # release or doctor --repair removes it)
        orphans = [str(p) for p in pair.new.check_invariants()]
        deleted_by_old = KeySchema(pair.prefix).ledger("{chat-1-copied-by-new}", "")
        in_store = deleted_by_old in ledgers
        assert orphans == in_store * [
            f"key not reachable from any index, expiring: {deleted_by_old}"
        ]


def test_a_clone_without_the_history_fails_and_says_so(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    from ..compat import previous

    (tmp_path / "previous_release").write_text("v9.9.9 " + "0" * 40 + "\n")
    monkeypatch.setattr(previous, "RELEASE_FILE", tmp_path / "previous_release")
    with pytest.raises(
        HistoryMissing, match=re.escape(f"needs the previous release v9.9.9 (commit {'0' * 40})")
    ):
        installed_release()
    assert not (previous.ROOT / ".cache" / "compat" / ("0" * 40)).exists()
    assert json.dumps(previous_release()) == json.dumps(["v9.9.9", "0" * 40])


@pytest.mark.parametrize("then", ["a put of this release", "a put of 0.1.0"])
def test_expiries_the_previous_release_shortens_are_not_taken_for_evictions(
    release_site: str, server_url: str, prefix: str, client: redis.Redis, then: str
) -> None:
    """0.1.0's set_thread_ttl gives every key of a thread its new expiry, but not the deadline
    ledger it does not know (lua/include/ledger.lua), whose deadlines are then later than the
    records' expiries. Each entry names the thread's ttl setting it was computed under, no
    longer the thread's: reads trust none of them. Either way, the records that expire read
    as expired, never as evicted (they raised CheckpointLostError before entries named it)."""
    keys = KeySchema(prefix)
    tag = keys.tag("t")
    options = {"ttl": {"default_ttl": 10}}
    old = OldSaver(server_url, prefix, options)
    try:
        with RedisSaver(server_url, prefix=prefix, **options) as new:
            ids = chain(new, "t", [{"step": i} for i in range(3)])
            old.call("set_thread_ttl", "t", 0.05)  # 3 seconds, from now
            time.sleep(1)
            if then == "a put of this release":
                version = new.get_next_version(None, None)
                checkpoint = make_checkpoint({"n": 3}, {"n": version})
                new.put(cfg("t", checkpoint_id=ids[-1]), checkpoint, {"step": 3}, {"n": version})
                ids.append(checkpoint["id"])
                # (the put finds the root's expiry shortened below the ledger's: the ledger
                # starts again from the records' real expiries, under the setting 0.1.0 set)
                entries = client.hgetall(keys.ledger(tag, ""))
                assert sorted(entries) == sorted(i.encode() for i in ids)
                latest = int(client.time()[0]) + 3
                for entry in entries.values():
                    deadline, setting = entry.split(b" ")
                    assert (int(deadline) <= latest, setting) == (True, b"3")
            else:
                # what 0.1.0's next put does to the thread's shared keys: their expiries
                # renewed (3 s from now), its ttl setting's too; the ledger left as it was
                for key in (keys.thread(tag), keys.index(tag, ""), keys.thread_ttl(tag)):
                    client.expire(key, 3)
            time.sleep(2.5)  # the first three records expired
            expected = ids[3:]
            assert listed_ids(new, cfg("t")) == expected
            latest = new.get_tuple(cfg("t"))
            assert (latest and latest.checkpoint["id"]) == (expected[0] if expected else None)
    finally:
        old.close()
