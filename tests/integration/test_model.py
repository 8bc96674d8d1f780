"""Model-based test: hypothesis drives ``RedisSaver`` against a plain-Python model.

Rules (each a hypothesis ``@rule``):

- ``put``: a checkpoint in one of 3 base threads (or a copy) and 2 namespaces ("" and
  "child:1"), child of the latest or of an earlier live checkpoint (a fork), or the first of a
  chain; a few channels, only some of them new (so blobs are shared), versions from
  ``saver.get_next_version``; metadata source/step/run_id/parents, user_id (sometimes missing)
  and tier (not indexed, sometimes missing).
- ``reput``: the same checkpoint id stored again with changed values and metadata.
- ``burst``: 100-130 checkpoints in a chain in one thread, one user_id and one run_id, so that
  filters match more than a list page (100) and an inner batch (128).
- ``wide_put``: at most once an example (about one in three), a checkpoint of 8,500 channels
  more (small values: its record holds more refs than a Lua unpack() takes) and a child
  carrying them, then a prune or a delete_for_runs of the wide one's run, a read of the child
  and a delete of the thread (a wide thread would make every later step on it slow).
- ``put_writes``: writes of a task against a live checkpoint, regular channels (first write
  wins) and special ones (``__error__``, ``__interrupt__``: replace).
- ``get_tuple``: latest or by id, compared whole (config, checkpoint with its channel values,
  metadata, parent config, pending writes in order).
- ``list_thread``: one thread, every namespace or one, with filter / before / limit.
- ``list_global``: ``list(None, filter=...)`` over every thread, indexed and unindexed keys.
  Limits around the page (100) and the inner batch (128): 1, 2, 99, 100, 101, 127, 128, 129,
  None. Without a limit the listing comes thread by thread (each thread's checkpoints newest
  first), but from a metadata index (newest first); with one, the newest of all.
- ``evict``: one key of a thread unlinked, as a server's eviction does; reads of the thread
  return what the model holds or raise CheckpointLostError (with
  ``on_lost_checkpoint="fall_back"`` also an older checkpoint, whole); a list of the namespace
  of a live checkpoint whose record was evicted raises (its deadline ledger tells it from an
  expired one, never a history with a hole), and a delete and the
  cleanup pass (``remove_orphans``, what ``rediskv doctor --repair`` runs) leave no key of it.
- ``evict_whole``: every key of a thread unlinked; its reads raise ThreadLostError while the
  registry of live threads must hold it due (a put of its graph's namespace with a ttl
  within 15/16 of the ttl, no delete or ttl change since), may raise it while the registry
  may, and read as a new thread otherwise.
- ``delete_thread``, ``delete_for_runs``, ``copy_thread`` (to a fresh thread or onto an existing
  one), ``prune`` (keep_latest / delete_all), ``pin_thread``, ``unpin_thread``,
  ``set_thread_ttl``.
- ``corrupt_record``: a live checkpoint's record becomes unreadable (noise, cut short, or in
  the first string layout); reading it is a ValueError that names it, check_invariants
  reports it, a prune, delete_for_runs or copy_thread then leaves it (the copy refuses, naming
  it), and delete_thread removes the whole thread (the oracle: no key of it is left).
- ``recreate``: close the saver and open another on the same prefix with another ``ttl`` (None,
  30/60/120 s, refresh_on_read or not), ``index_metadata`` (default, or with user_id) and
  ``keep_last`` (None, 1 or 3: after every put, the checkpoints older than the newest
  keep_last may be gone, and without a ttl exactly the oldest, 8 at most, are).
- ``migrate_keep_last_source``: with keep_last (and no refresh_on_read), one thread migrated
  into a fresh prefix: the report says copied and verified, and the copy holds exactly the
  model's checkpoints and pending writes. (The model's checkpoints have no delta channels:
  what keep_last hides for those is tests/e2e/test_migrate.py's.)
- ``advance``: 10, 40, 61 or 200 s pass, without sleeping (``tests/clock.py`` lowers every PTTL).
- ``put_while_its_slot_moves`` (the same machine on the suite's 3-node cluster,
  ``TestSaverModelOnCluster``): the thread's slot is being moved to another node (0, 3 or all
  of its keys moved first) while a put runs; the put waits and is stored whole.
- ``concurrent_puts_with_an_oversized_value``: 2-5 puts at once through an auto-pipelined
  AsyncRedisSaver, one of them over the server's proto-max-bulk-len (the model's private
  server has 1 MB): only that one fails, with ValueTooLargeError, and it writes nothing.

The oracle:

- After every step ``saver.check_invariants()`` must be ``[]``, a thread the model knows to be
  empty (deleted, or idle past its ttl) has no key under its hash tag, and once every thread is
  empty and every finite expiry ever given has passed, the prefix holds no key at all (but
  ``P:mk``, the registry of indexed metadata keys: a setting of the prefix).
- Without any ttl the model is exact: each checkpoint's "alive until" is infinite, every result
  must equal the model's.
- With a ttl the model keeps sound bounds, not the implementation's key-by-key expiry. A
  checkpoint must be returned while ``now < alive_until``: its write (or a refreshing read, or
  set_thread_ttl/pin/unpin) plus its thread's ttl (pinned: forever; a checkpoint written with
  no ttl at all: forever, whatever savers come later). When a saver with a shorter ttl takes
  over, finite bounds shrink to ``anchor + new ttl`` (a later put may legitimately give shared
  blobs and indexes the shorter expiry). A thread idle past ``gone_after`` (the latest expiry
  any of its writes gave) must have no key left. In between, a checkpoint may be returned or
  not, but what is returned must equal what was put. Pending writes carry the same kind of
  bound per write. A checkpoint observed absent is dropped from the model (it cannot come back).
- Lists must return, newest first (list(None) without a limit: thread by thread, each thread
  newest first), only checkpoints that may exist and match, every one that must exist (all of
  them, or, with a full page, all those newer than the last one returned).

``RSKV_MODEL_EXAMPLES`` / ``RSKV_MODEL_STEPS`` select a long run (e.g. 2000). For triage,
``RSKV_MODEL_SKIP`` names failure kinds to ignore (comma-separated prefixes of the names in
the failure messages, e.g. ``check_invariants,list_global[indexed].missing``, or ``reput`` to
turn that rule off); it is empty by default and must stay so in CI.
"""

from __future__ import annotations

import asyncio
import copy
import math
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, ClassVar

import pytest
import redis
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.base import (
    WRITES_IDX_MAP,
    CheckpointTuple,
    empty_checkpoint,
    get_serializable_checkpoint_metadata,
    writes_sort_key,
)
from langgraph.checkpoint.base.id import uuid6
from redis.cluster import RedisCluster

from langgraph.checkpoint.rediskv import (
    AsyncRedisSaver,
    CheckpointLostError,
    RedisSaver,
    ThreadLostError,
)
from langgraph.checkpoint.rediskv.core import Limits
from langgraph.checkpoint.rediskv.core.check import UNREADABLE_BLOB
from langgraph.checkpoint.rediskv.eviction import remove_orphans
from langgraph.checkpoint.rediskv.keys import decode_part, parse_record
from langgraph.checkpoint.rediskv.options import SaverSettings

from ..clock import advance_time
from ..conftest import LocalCluster, PrivateServer, new_prefix, saver_with_limits, slot_moving
from ..prose import PROSE as CORPUS_PROSE

INF = math.inf
BASE_THREADS = ("t0", "t1", "t:2")
NAMESPACES = ("", "child:1")
CHANNELS = ("messages", "counter", "profile", "summary")
SOURCES = ("input", "loop", "update", "fork")
RUNS = ("run-0", "run-1", "run-2")
USERS = ("u0", "u1", "u2")
TIERS = ("free", "pro")
TASKS = {
    "task-a": "~__pregel_pull, agent",
    "task-b": "~__pregel_pull, tools",
    "task-c": "~__pregel_push, 0",
}
WRITE_CHANNELS = ("messages", "counter", "__error__", "__interrupt__")
LIMITS = (1, 2, 99, 100, 101, 127, 128, 129, None)
DEFAULT_INDEX = ("source", "step", "run_id")
INDEXES = (DEFAULT_INDEX, (*DEFAULT_INDEX, "user_id"))
# (default_ttl minutes, refresh_on_read) or None: 30, 60 and 120 s
TTLS: tuple[tuple[float, bool] | None, ...] = (
    None,
    (1, False),
    (1, True),
    (0.5, False),
    (2, True),
)
ADVANCES = (10, 40, 61, 200)
KEEP_LAST = (None, None, 1, 3)  # the saver's keep_last after a recreate
TRIM_STEP = 8  # checkpoints a put trims at most (lua/include/trim.lua)
MAX_COPIES = 3
MAX_BURSTS = 2
MAX_WIDE = 1
WIDE_CHANNELS = tuple(f"wide-{n}" for n in range(8_500))  # unpack() fails beyond ~8,000
# real prose for the long values
PROSE = CORPUS_PROSE[200:2000]
SKIP = tuple(s.strip() for s in os.environ.get("RSKV_MODEL_SKIP", "").split(",") if s.strip())

_FAILURES: dict[str, type[AssertionError]] = {}


def fail(kind: str, message: str) -> None:
    """Raise an AssertionError of a class named after ``kind``: hypothesis tells failures apart
    by exception type and place, so each kind is shrunk and reported on its own."""
    if kind.startswith(SKIP) and SKIP:
        return
    cls = _FAILURES.get(kind)
    if cls is None:
        name = "".join(c if c.isalnum() else "_" for c in kind)
        cls = _FAILURES[kind] = type(f"ModelMismatch_{name}", (AssertionError,), {})
    raise cls(f"[{kind}] {message}")


def cfg(thread_id: str, ns: str, checkpoint_id: str) -> dict[str, Any]:
    return {
        "configurable": {
            "thread_id": thread_id,
            "checkpoint_ns": ns,
            "checkpoint_id": checkpoint_id,
        }
    }


@dataclass
class Write:
    """One pending write (task, slot) of a checkpoint; ``options`` lists the (channel, value)
    it may hold (more than one only when a first-wins write met a write that may have
    expired), and it must be there while ``now < alive_until``."""

    task_id: str
    slot: int
    options: list[tuple[str, Any]]
    alive_until: float

    @property
    def sort_key(self) -> tuple[str, str, int]:
        return writes_sort_key(TASKS[self.task_id], self.task_id, self.slot)


@dataclass
class Cp:
    ns: str
    id: str
    checkpoint: dict[str, Any]  # with channel_values: exactly what get_tuple must return
    metadata: dict[str, Any]
    parent_id: str | None
    alive_until: float  # must be returned while now < alive_until
    anchor: float  # when alive_until was last set from a ttl
    writes: dict[tuple[str, int], Write] = field(default_factory=dict)


@dataclass
class Thread:
    id: str
    cps: dict[tuple[str, str], Cp] = field(default_factory=dict)
    own: int | None = None  # its own ttl in seconds, 0 when pinned, None: the saver's default
    gone_after: float = -INF  # no key may be left once now >= gone_after
    clean: bool = True  # the model knows it has no key at all
    # the registry of live threads (P:alive) must hold the thread due while now < due_until,
    # and may while now < noted_until (lua/thread_deadlines.lua)
    due_until: float = -INF
    noted_until: float = -INF
    # a delete holds the thread in the registry a minute: notes are refused meanwhile
    held_until: float = -INF


picks = st.integers(min_value=0, max_value=50)
filter_items = st.one_of(
    st.tuples(st.just("source"), st.sampled_from(SOURCES)),
    st.tuples(st.just("step"), st.integers(-1, 4)),
    st.tuples(st.just("run_id"), st.sampled_from(RUNS)),
    st.tuples(st.just("user_id"), st.sampled_from((*USERS, None))),
    st.tuples(st.just("tier"), st.sampled_from((*TIERS, None))),
)
filters = st.none() | st.lists(filter_items, max_size=2, unique_by=lambda kv: kv[0]).map(dict)


class SaverMachine(RuleBasedStateMachine):
    server_url: ClassVar[str] = ""
    cluster: ClassVar[bool] = False
    limits: ClassVar[Limits] = Limits()

    def new_saver(self, **options: Any) -> RedisSaver:
        return saver_with_limits(
            self.server_url, self.limits, prefix=self.prefix, cluster=self.cluster, **options
        )

    def __init__(self) -> None:
        super().__init__()
        assert self.server_url, "the server_url fixture did not run"
        self.prefix = new_prefix()
        self.client: Any = (
            RedisCluster.from_url(self.server_url)
            if self.cluster
            else redis.Redis.from_url(self.server_url)
        )
        self.now = 0.0
        self.saver_ttl: int | None = None
        self.refresh = False
        self.indexed: tuple[str, ...] = DEFAULT_INDEX
        self.keep_last: int | None = None
        self.saver = self.new_saver()
        # reads by id without refreshing anything, to settle what the model is unsure of
        self.prober = self.new_saver()
        # the prober with the opt-in fallback of a latest checkpoint that lost a value
        self.fall_back = self.new_saver(on_lost_checkpoint="fall_back")
        self.threads: dict[str, Thread] = {t: Thread(t) for t in BASE_THREADS}
        self.copies = 0
        self.bursts = 0
        self.wides = 0
        self.counter = 0
        self.last_id = ""
        # the latest finite expiry ever given to any key (also of threads deleted since)
        self.finite_gone_after = -INF

    def teardown(self) -> None:
        self.saver.close()
        self.prober.close()
        self.fall_back.close()
        keys = list(self.client.scan_iter(match=f"{self.prefix}:*", count=1000))
        for start in range(0, len(keys), 1000):
            self.client.unlink(*keys[start : start + 1000])
        self.client.close()

    # -- model helpers ---------------------------------------------------------------------
    def pick_thread(self, pick: int) -> Thread:
        ids = list(self.threads)
        return self.threads[ids[pick % len(ids)]]

    def ttl_of(self, th: Thread) -> float:
        """Seconds a write to the thread lasts now (INF: no expiry)."""
        if th.own is not None:
            return INF if th.own == 0 else th.own
        return INF if self.saver_ttl is None else self.saver_ttl

    def touch(self, th: Thread, ttl: float) -> None:
        """The thread got keys that expire ``ttl`` from now."""
        th.clean = False
        th.gone_after = max(th.gone_after, self.now + ttl)
        if ttl < INF:
            self.finite_gone_after = max(self.finite_gone_after, self.now + ttl)

    def reset(self, th: Thread) -> None:
        th.cps.clear()
        th.own = None
        th.gone_after = -INF
        th.clean = True
        self.forgotten(th)
        th.held_until = self.now + 60  # (of the server's clock, which virtual time only shortens)

    def forgotten(self, th: Thread) -> None:
        """The saver took the thread out of the registry of live threads."""
        th.due_until = th.noted_until = -INF

    def ttl_set(self, th: Thread, seconds: int) -> None:
        """A ttl change notes the thread's new deadline (less the time its job took and two
        seconds; none when pinned)."""
        if seconds > 0:
            th.due_until = self.now + seconds - 10
            th.noted_until = self.now + seconds + 2

    def noted(self, th: Thread, ttl: float, by_this_saver: bool) -> None:
        """A put of the graph's namespace with a finite ttl: the saver notes its deadline when
        it has grown by a sixteenth of the ttl since it last did (a second of the server's
        clock aside), and it forgets the thread's note at every delete or ttl change; another
        saver's note may lag by more (it knows of no such forget)."""
        if ttl == INF:
            return
        if by_this_saver and self.now >= th.held_until:
            th.due_until = max(th.due_until, self.now + ttl - ttl / 16 - 2)
        th.noted_until = max(th.noted_until, self.now + ttl + 2)

    def must(self, cp: Cp) -> bool:
        return self.now < cp.alive_until

    def next_id(self) -> str:
        while True:
            new = str(uuid6())
            if new > self.last_id:  # ids must grow, as LangGraph's do
                self.last_id = new
                return new

    def value(self, channel: str) -> Any:
        self.counter += 1
        n = self.counter
        if channel == "counter":
            return n
        if channel == "profile":
            return {"name": "Ada", "visits": n, "tags": ["a", "b"]}
        if channel.startswith("wide-"):
            return n
        if channel == "summary":  # over 1 KB, mostly the same: stored against a base
            return f"summary {n}: {PROSE[:1200]}"
        raise AssertionError(channel)

    def write_value(self, channel: str) -> Any:
        self.counter += 1
        n = self.counter
        if channel == "messages":
            return [AIMessage(f"partial {n}")]
        if channel == "counter":
            return n
        if channel == "__error__":
            return {"message": f"boom {n}"}
        return [{"value": f"ask {n}", "id": f"i{n}"}]

    def live_cps(self, th: Thread, ns: str) -> list[Cp]:
        return sorted(
            (cp for cp in th.cps.values() if cp.ns == ns and self.must(cp)), key=lambda cp: cp.id
        )

    # -- checks ----------------------------------------------------------------------------
    def check_tuple(self, op: str, got: CheckpointTuple, th: Thread, cp: Cp) -> None:
        diffs = {}
        if got.config != cfg(th.id, cp.ns, cp.id):
            diffs["config"] = (got.config, cfg(th.id, cp.ns, cp.id))
        if got.checkpoint != cp.checkpoint:
            got_values = got.checkpoint.get("channel_values", {})
            want_values = cp.checkpoint["channel_values"]
            diffs["checkpoint"] = {
                "channel_values": {
                    k: (got_values.get(k, "<missing>"), want_values.get(k, "<missing>"))
                    for k in set(got_values) | set(want_values)
                    if got_values.get(k, "<missing>") != want_values.get(k, "<missing>")
                },
                "other": {
                    k: (got.checkpoint.get(k), cp.checkpoint.get(k))
                    for k in set(got.checkpoint) | set(cp.checkpoint)
                    if k != "channel_values" and got.checkpoint.get(k) != cp.checkpoint.get(k)
                },
            }
        if got.metadata != cp.metadata:
            diffs["metadata"] = (got.metadata, cp.metadata)
        want_parent = cfg(th.id, cp.ns, cp.parent_id) if cp.parent_id else None
        if got.parent_config != want_parent:
            diffs["parent_config"] = (got.parent_config, want_parent)
        if diffs:
            fail(f"{op}.content", f"{th.id!r} {cp.ns!r} {cp.id}: got vs model {diffs}")

    def check_writes(self, op: str, got: CheckpointTuple, th: Thread, cp: Cp) -> list[Write]:
        """The returned pending writes against the model; returns the model writes seen."""
        entries = sorted(cp.writes.values(), key=lambda w: w.sort_key)
        pending = [tuple(w) for w in got.pending_writes or []]
        where = f"{th.id!r} {cp.ns!r} {cp.id}"
        if all(len(w.options) == 1 and w.alive_until > self.now for w in entries):
            want = [(w.task_id, *w.options[0]) for w in entries]
            if pending != want:
                fail(f"{op}.writes", f"{where}: pending_writes {pending}, model {want}")
            return entries
        seen: list[Write] = []
        i = 0
        for w in entries:
            if i < len(pending) and pending[i][0] == w.task_id and pending[i][1:] in w.options:
                seen.append(w)
                i += 1
            elif w.alive_until > self.now:
                fail(f"{op}.writes", f"{where}: write {w} missing from {pending}")
        if i < len(pending):
            fail(f"{op}.writes", f"{where}: unexpected writes {pending[i:]} (model {entries})")
        return seen

    def observed(
        self, op: str, got: CheckpointTuple, th: Thread, cp: Cp, renew: float | None = None
    ) -> None:
        """A checkpoint came back: check it whole, and settle what the model was unsure of
        (writes not seen are gone for good; ``renew``: a refreshing read renewed it)."""
        self.check_tuple(op, got, th, cp)
        seen = self.check_writes(op, got, th, cp)
        position = {id(w): i for i, w in enumerate(seen)}
        for key, w in list(cp.writes.items()):
            if id(w) not in position:
                del cp.writes[key]  # not there now: it cannot come back
                continue
            _, channel, value = got.pending_writes[position[id(w)]]
            w.options = [(channel, value)]
            if renew is not None:
                w.alive_until = renew
        if renew is not None:
            cp.alive_until = renew
            cp.anchor = self.now

    def check_listing(
        self,
        op: str,
        got: list[CheckpointTuple],
        candidates: list[tuple[Thread, Cp]],
        limit: int | None,
        call: str,
        by_thread: bool = False,
    ) -> None:
        """``by_thread``: the listing comes thread by thread (list(None) without a limit,
        not from a metadata index), each thread's checkpoints newest first; else all of them
        newest first."""
        by_key = {(th.id, cp.ns, cp.id): (th, cp) for th, cp in candidates}
        must = {k for k, (_, cp) in by_key.items() if self.must(cp)}
        keys = [
            (
                t.config["configurable"]["thread_id"],
                t.config["configurable"]["checkpoint_ns"],
                t.config["configurable"]["checkpoint_id"],
            )
            for t in got
        ]
        summary = f"{call} returned {len(got)}, model: {len(must)} must exist of {len(by_key)}"
        if limit is not None and len(got) > limit:
            fail(f"{op}.limit", summary)
        unknown = [k for k in keys if k not in by_key]
        if unknown:
            fail(f"{op}.extra", f"{summary}; not in the model (or not matching): {unknown[:5]}")
        if len(set(keys)) != len(keys):
            fail(f"{op}.duplicates", summary)
        ids = [k[2] for k in keys]
        if by_thread:
            runs = [k[0] for n, k in enumerate(keys) if n == 0 or keys[n - 1][0] != k[0]]
            if len(runs) != len(set(runs)):
                fail(f"{op}.order", f"{summary}; threads not one after the other: {runs[:10]}")
            for thread_id in runs:
                own = [k[2] for k in keys if k[0] == thread_id]
                if own != sorted(own, reverse=True):
                    fail(f"{op}.order", f"{summary}; {thread_id!r} not newest first: {own[:10]}")
        elif ids != sorted(ids, reverse=True):
            fail(f"{op}.order", f"{summary}; ids not newest first: {ids[:10]}")
        if limit is None or len(got) < limit:
            missing = sorted(must - set(keys), key=lambda k: k[2], reverse=True)
        else:
            missing = sorted(
                (k for k in must - set(keys) if k[2] > ids[-1]), key=lambda k: k[2], reverse=True
            )
        if missing:
            fail(f"{op}.missing", f"{summary}; missing {len(missing)}: {missing[:5]}")
        for t, k in zip(got, keys, strict=True):
            th, cp = by_key[k]
            self.observed(op, t, th, cp)

    def settle(self, th: Thread) -> None:
        """Read every checkpoint the model is unsure of (no refresh): drop those gone."""
        for key, cp in list(th.cps.items()):
            if self.must(cp):
                continue
            got = self.prober.get_tuple(cfg(th.id, cp.ns, cp.id))
            if got is None:
                del th.cps[key]
            else:
                self.observed("probe", got, th, cp)

    def keys_by_thread(self) -> tuple[list[str], dict[str, list[str]]]:
        """Every key of the prefix but the registry of indexed metadata keys (P:mk, a setting
        of the prefix), a cluster's registry of lists (P:tl, swept as lists go idle) and the
        registry of live threads (P:alive, checked by store_is_consistent), and those of each
        thread (its hash tag)."""
        registries = (f"{self.prefix}:mk", f"{self.prefix}:tl", f"{self.prefix}:alive")
        keys = [
            k.decode()
            for k in self.client.scan_iter(match=f"{self.prefix}:*", count=1000)
            if k.decode() not in registries
        ]
        tags = {t: self.saver._core.keys.tag(t) for t in self.threads}
        return keys, {t: [k for k in keys if tag in k] for t, tag in tags.items()}

    def matches(self, metadata: dict[str, Any], flt: dict[str, Any] | None) -> bool:
        return all(
            metadata.get(k) == v and type(metadata.get(k)) is type(v)
            for k, v in (flt or {}).items()
        )

    # -- writes ----------------------------------------------------------------------------
    def put_one(
        self,
        th: Thread,
        ns: str,
        parent: Cp | None,
        changed: set[str],
        metadata: dict[str, Any],
        *,
        base: Cp | None = None,
        checkpoint_id: str | None = None,
        send: Any = None,
    ) -> Cp:
        """Put a checkpoint whose values are ``base``'s (default: the parent's) with the
        ``changed`` channels new; returns its model record."""
        base = base or parent
        if base is None:
            values: dict[str, Any] = {}
            versions: dict[str, Any] = {}
            changed = {*changed, "messages", "counter", "profile"}
        else:
            values = copy.deepcopy(base.checkpoint["channel_values"])
            versions = dict(base.checkpoint["channel_versions"])
        new_versions = {}
        for ch in sorted(changed):
            if ch == "messages":
                msgs = list(values.get("messages", []))
                self.counter += 1
                # long enough that the list is soon stored against a base (reference
                # compression, from 1 KB): a few messages in, every new version is
                text = f"{self.counter}: {PROSE[(self.counter * 97) % 1500 :][:150]}"
                msgs.append(
                    HumanMessage(f"user {text}") if len(msgs) % 2 == 0 else AIMessage(f"bot {text}")
                )
                values[ch] = msgs
            else:
                values[ch] = self.value(ch)
            versions[ch] = self.saver.get_next_version(versions.get(ch), None)
            new_versions[ch] = versions[ch]
        checkpoint = empty_checkpoint()
        checkpoint["id"] = checkpoint_id or self.next_id()
        checkpoint["channel_values"] = values
        checkpoint["channel_versions"] = versions
        checkpoint["versions_seen"] = {"agent": dict(new_versions)}
        checkpoint["updated_channels"] = sorted(changed)
        config: dict[str, Any] = {"configurable": {"thread_id": th.id, "checkpoint_ns": ns}}
        parent_id = parent.id if parent else (base.parent_id if base else None)
        if parent_id:
            config["configurable"]["checkpoint_id"] = parent_id
        stored = (send or self.saver.put)(
            config, copy.deepcopy(checkpoint), dict(metadata), new_versions
        )
        if stored != cfg(th.id, ns, checkpoint["id"]):
            fail("put.reply", f"put returned {stored}")
        ttl = self.ttl_of(th)
        old = th.cps.get((ns, checkpoint["id"]))
        cp = Cp(
            ns=ns,
            id=checkpoint["id"],
            checkpoint=checkpoint,
            metadata=get_serializable_checkpoint_metadata(config, metadata),  # type: ignore[arg-type]
            parent_id=parent_id,
            alive_until=self.now + ttl,
            anchor=self.now,
            writes=old.writes if old else {},  # re-putting an id keeps its pending writes
        )
        th.cps[(ns, cp.id)] = cp
        self.touch(th, ttl)
        if ns == "":
            self.noted(th, ttl, by_this_saver=send is None)
        if send is None:
            self.trim(th, ns, exact=True)
        return cp

    def trim(self, th: Thread, ns: str, exact: bool) -> None:
        """After a put with keep_last: the checkpoints of the namespace older than the newest
        keep_last may be gone (probed and settled). Without a ttl, the model's checkpoints are
        the index's, so which ones went is exact: the oldest, TRIM_STEP at most."""
        if self.keep_last is None:
            return
        cps = sorted((cp for cp in th.cps.values() if cp.ns == ns), key=lambda cp: cp.id)
        excess = max(0, len(cps) - self.keep_last)
        for cp in cps[:excess]:
            cp.alive_until = min(cp.alive_until, self.now)
        self.settle(th)
        if exact and self.finite_gone_after == -INF:
            left = sorted(cp.id for cp in th.cps.values() if cp.ns == ns)
            expected = [cp.id for cp in cps[min(excess, TRIM_STEP) :]]
            if left != expected:
                fail(
                    "keep_last.trimmed",
                    f"{th.id!r}/{ns!r} keep_last={self.keep_last}: {len(left)} left of "
                    f"{len(cps)}, expected {len(expected)}",
                )

    def metadata(
        self, source: str, step: int, run: str, user: str | None, tier: str | None
    ) -> dict[str, Any]:
        md: dict[str, Any] = {"source": source, "step": step, "run_id": run, "parents": {}}
        if user is not None:
            md["user_id"] = user
        if tier is not None:
            md["tier"] = tier
        return md

    @rule(
        thread=picks,
        ns=st.sampled_from(NAMESPACES),
        parent=st.none() | picks,
        changed=st.sets(st.sampled_from(CHANNELS), max_size=3),
        source=st.sampled_from(SOURCES),
        run=st.sampled_from(RUNS),
        user=st.sampled_from((*USERS, None)),
        tier=st.sampled_from((*TIERS, None)),
    )
    def put(
        self,
        thread: int,
        ns: str,
        parent: int | None,
        changed: set[str],
        source: str,
        run: str,
        user: str | None,
        tier: str | None,
    ) -> None:
        th = self.pick_thread(thread)
        # parents come from what must still be there, as LangGraph reads it before writing
        live = self.live_cps(th, ns)
        parent_cp = (live[-1] if parent is None else live[parent % len(live)]) if live else None
        step = parent_cp.metadata["step"] + 1 if parent_cp else -1
        self.put_one(th, ns, parent_cp, changed, self.metadata(source, step, run, user, tier))

    @precondition(
        lambda self: (
            "reput" not in SKIP
            and any(self.must(cp) for th in self.threads.values() for cp in th.cps.values())
        )
    )
    @rule(
        pick=picks,
        changed=st.sets(st.sampled_from(CHANNELS), min_size=1, max_size=2),
        run=st.sampled_from(RUNS),
        user=st.sampled_from((*USERS, None)),
    )
    def reput(self, pick: int, changed: set[str], run: str, user: str | None) -> None:
        """Store an existing checkpoint id again (same parent), with other values and
        metadata; the channels that do not change keep the blobs of the replaced record."""
        live = [(th, cp) for th in self.threads.values() for cp in th.cps.values() if self.must(cp)]
        th, old = live[pick % len(live)]
        md = self.metadata("update", old.metadata["step"], run, user, None)
        self.put_one(th, old.ns, None, changed, md, base=old, checkpoint_id=old.id)

    @precondition(lambda self: self.bursts < MAX_BURSTS)
    @rule(
        thread=picks,
        count=st.integers(100, 130),
        user=st.sampled_from(USERS),
        run=st.sampled_from(RUNS),
    )
    def burst(self, thread: int, count: int, user: str, run: str) -> None:
        self.bursts += 1
        th = self.pick_thread(thread)
        live = self.live_cps(th, "")
        parent = live[-1] if live else None
        for _ in range(count):
            step = parent.metadata["step"] + 1 if parent else -1
            md = self.metadata("loop", step, run, user, "pro")
            parent = self.put_one(th, "", parent, {"counter"}, md)

    @precondition(lambda self: self.wides < MAX_WIDE)
    @rule(
        thread=picks,
        ns=st.sampled_from(NAMESPACES),
        run=st.sampled_from(RUNS),
        then=st.sampled_from(("prune", "delete_for_runs")),
        odds=st.integers(0, 2),
    )
    def wide_put(self, thread: int, ns: str, run: str, then: str, odds: int) -> None:
        """A checkpoint of WIDE_CHANNELS more (run "run-wide") and a child carrying them, then
        a prune (it keeps the wide child) or a delete_for_runs of "run-wide" (it walks the
        wide child), a read of the child, and a delete of the thread: a wide thread makes
        every later step on it slow."""
        if odds:  # (one draw in three: the rule is picked about twice an example)
            return
        self.wides += 1
        th = self.pick_thread(thread)
        live = self.live_cps(th, ns)
        parent = live[-1] if live else None
        step = parent.metadata["step"] + 1 if parent else -1
        wide = self.put_one(
            th,
            ns,
            parent,
            {"counter", *WIDE_CHANNELS},
            self.metadata("loop", step, "run-wide", None, None),
        )
        md = self.metadata("loop", step + 1, run, None, None)
        child = self.put_one(th, ns, wide, {"counter"}, md)
        if then == "prune":
            self.prune([thread], "keep_latest")
        else:
            self.delete_for_runs(["run-wide"])
        got = self.prober.get_tuple(cfg(th.id, ns, child.id))
        if got is None:
            if self.must(child):
                fail(f"wide_put.{then}", f"{th.id!r} {ns!r} {child.id}: the wide child is gone")
        else:
            self.observed(f"wide_put.{then}", got, th, child)
        self.delete_thread(thread)

    @precondition(
        lambda self: any(self.must(cp) for th in self.threads.values() for cp in th.cps.values())
    )
    @rule(
        pick=picks,
        task=st.sampled_from(sorted(TASKS)),
        channels=st.lists(st.sampled_from(WRITE_CHANNELS), min_size=1, max_size=3),
    )
    def put_writes(self, pick: int, task: str, channels: list[str]) -> None:
        live = [(th, cp) for th in self.threads.values() for cp in th.cps.values() if self.must(cp)]
        th, cp = live[pick % len(live)]
        writes = [(ch, self.write_value(ch)) for ch in channels]
        self.saver.put_writes(cfg(th.id, cp.ns, cp.id), copy.deepcopy(writes), task, TASKS[task])
        ttl = self.ttl_of(th)
        until = self.now + ttl
        # the hash gets a fresh expiry: writes that surely were there are renewed
        for w in cp.writes.values():
            if w.alive_until > self.now:
                w.alive_until = until
        for idx, (ch, value) in enumerate(writes):
            slot = WRITES_IDX_MAP.get(ch, idx)
            old = cp.writes.get((task, slot))
            if old is None or slot < 0:
                cp.writes[(task, slot)] = Write(task, slot, [(ch, value)], until)
            elif old.alive_until <= self.now:
                # first wins, but the first may have expired: either may be there now
                old.options.append((ch, value))
                old.alive_until = until
        self.touch(th, ttl)

    # -- reads -----------------------------------------------------------------------------
    @rule(thread=picks, ns=st.sampled_from(NAMESPACES), which=st.none() | picks)
    def get_tuple(self, thread: int, ns: str, which: int | None) -> None:
        th = self.pick_thread(thread)
        cps = sorted((cp for cp in th.cps.values() if cp.ns == ns), key=lambda cp: cp.id)
        ttl = self.ttl_of(th)
        refreshing = self.refresh and self.saver_ttl is not None and ttl < INF
        renew = self.now + ttl if refreshing else None
        if which is None or not cps:
            got = self.saver.get_tuple({"configurable": {"thread_id": th.id, "checkpoint_ns": ns}})
            must = [cp for cp in cps if self.must(cp)]
            call = f"get_tuple({th.id!r}, {ns!r}, latest)"
            if got is None:
                if must:
                    fail("get_tuple.missing", f"{call} is None, model latest {must[-1].id}")
                return
            got_id = got.config["configurable"]["checkpoint_id"]
            cp = th.cps.get((ns, got_id))
            if cp is None:
                fail("get_tuple.extra", f"{call} returned {got_id}, not in the model")
                return
            if must and got_id < must[-1].id:
                fail("get_tuple.stale", f"{call} returned {got_id}, model latest {must[-1].id}")
        else:
            cp = cps[which % len(cps)]
            got = self.saver.get_tuple(cfg(th.id, ns, cp.id))
            call = f"get_tuple({th.id!r}, {ns!r}, {cp.id})"
            if got is None:
                if self.must(cp):
                    fail("get_tuple.missing", f"{call} is None")
                del th.cps[(ns, cp.id)]  # observed gone: it cannot come back
                return
        self.observed("get_tuple", got, th, cp, renew)
        if renew is not None:
            self.touch(th, ttl)

    @rule(
        thread=picks,
        ns=st.sampled_from((None, *NAMESPACES)),
        flt=filters,
        before=st.none() | picks,
        limit=st.sampled_from(LIMITS),
    )
    def list_thread(
        self,
        thread: int,
        ns: str | None,
        flt: dict[str, Any] | None,
        before: int | None,
        limit: int | None,
    ) -> None:
        th = self.pick_thread(thread)
        config: dict[str, Any] = {"configurable": {"thread_id": th.id}}
        if ns is not None:
            config["configurable"]["checkpoint_ns"] = ns
        ids = sorted(cp.id for cp in th.cps.values())
        before_id = ids[before % len(ids)] if before is not None and ids else None
        before_cfg = cfg(th.id, "", before_id) if before_id else None
        got = list(self.saver.list(config, filter=flt, before=before_cfg, limit=limit))
        candidates = [
            (th, cp)
            for cp in th.cps.values()
            if (ns is None or cp.ns == ns)
            and self.matches(cp.metadata, flt)
            and (before_id is None or cp.id < before_id)
        ]
        call = f"list({th.id!r}, ns={ns!r}, filter={flt}, before={before_id}, limit={limit})"
        self.check_listing("list_thread", got, candidates, limit, call)

    @rule(flt=filters, before=st.none() | picks, limit=st.sampled_from(LIMITS))
    def list_global(
        self, flt: dict[str, Any] | None, before: int | None, limit: int | None
    ) -> None:
        ids = sorted(cp.id for th in self.threads.values() for cp in th.cps.values())
        before_id = ids[before % len(ids)] if before is not None and ids else None
        before_cfg = cfg("any", "", before_id) if before_id else None
        got = list(self.saver.list(None, filter=flt, before=before_cfg, limit=limit))
        candidates = [
            (th, cp)
            for th in self.threads.values()
            for cp in th.cps.values()
            if self.matches(cp.metadata, flt) and (before_id is None or cp.id < before_id)
        ]
        indexed = any(k in self.indexed and v is not None for k, v in (flt or {}).items())
        op = "list_global[indexed]" if indexed else "list_global[scan]"
        call = f"list(None, filter={flt}, before={before_id}, limit={limit})"
        # without a limit, thread by thread (but from a metadata index: the saver's, none on
        # a cluster); with one, the newest of all
        from_index = any(
            k in self.saver.indexed_metadata and v is not None for k, v in (flt or {}).items()
        )
        by_thread = limit is None and not from_index
        self.check_listing(op, got, candidates, limit, call, by_thread=by_thread)

    # -- deletes and copies ----------------------------------------------------------------
    @rule(thread=picks)
    def delete_thread(self, thread: int) -> None:
        th = self.pick_thread(thread)
        self.saver.delete_thread(th.id)
        self.reset(th)

    @rule(thread=picks, which=st.integers(0, 10_000))
    def evict(self, thread: int, which: int) -> None:
        """The server evicts one key of a thread (a maxmemory-policy other than noeviction):
        each read of the thread then returns checkpoints equal to the model's (a shorter
        history or an older latest one may be what is left when it lost another key: the
        ledger, or all of it: docs/reliability.md, Eviction) or raises CheckpointLostError
        naming it, and a list always does when the key is a live checkpoint's record; the app
        deletes the thread, which leaves no key of it (checked by the invariants)."""
        th = self.pick_thread(thread)
        _, by_thread = self.keys_by_thread()
        keys = sorted(k for k in by_thread[th.id] if ":gc:" not in k)
        if not keys:
            return
        evicted = keys[which % len(keys)]
        self.client.unlink(evicted)
        # a live checkpoint's record (with more than the ledger's second of grace left: the
        # model's clock and the server's differ by the time the steps take)
        schema = self.saver._core.keys
        tag = schema.tag(th.id)
        record_of = next(
            (
                cp
                for cp in th.cps.values()
                if schema.checkpoint(tag, cp.ns, cp.id) == evicted and cp.alive_until - self.now > 3
            ),
            None,
        )
        for ns in NAMESPACES:
            config = {"configurable": {"thread_id": th.id, "checkpoint_ns": ns}}
            # fall_back: an older checkpoint equal to the model's, or the error; never partial
            for read in ("get_tuple", "fall_back", "list"):
                try:
                    if read in ("get_tuple", "fall_back"):
                        reader = self.prober if read == "get_tuple" else self.fall_back
                        latest = reader.get_tuple(config)
                        got = [latest] if latest is not None else []
                    else:
                        got = list(self.prober.list(config))
                except CheckpointLostError as exc:
                    if exc.thread_id != th.id:
                        fail("evict.error", f"{read} of {th.id!r} named {exc.thread_id!r}")
                    continue
                if read == "list" and record_of is not None and record_of.ns == ns:
                    fail("evict.silent", f"list of {th.id!r} {ns!r} skipped evicted {evicted}")
                for t in got:
                    cp = th.cps.get((ns, t.config["configurable"]["checkpoint_id"]))
                    if cp is None:
                        fail("evict.extra", f"{read} of {th.id!r} returned {t.config}")
                        return
                    self.check_tuple(f"evict.{read}", t, th, cp)
        # the app deletes the thread; what no index leads to any more (the blobs of an evicted
        # record, ...) goes with a cleanup pass over its keys (rediskv doctor --repair removes
        # those that never expire)
        self.saver.delete_thread(th.id)
        tag = self.saver._core.keys.tag(th.id)
        of_thread = [p for p in self.saver.check_invariants() if tag in p.key]
        remove_orphans(self.client, of_thread, expiring=True)
        self.reset(th)

    @rule(thread=picks)
    def evict_whole(self, thread: int) -> None:
        """The server evicts every key of a thread: its reads raise ThreadLostError naming
        it while the registry of live threads must hold it due, may while it may, and read
        it as a thread that never existed otherwise; the app deletes it."""
        th = self.pick_thread(thread)
        _, by_thread = self.keys_by_thread()
        if not by_thread[th.id]:
            return
        self.client.unlink(*by_thread[th.id])
        config = {"configurable": {"thread_id": th.id, "checkpoint_ns": ""}}
        reads = {
            "get_tuple": lambda: self.prober.get_tuple(config),
            "list": lambda: list(self.prober.list({"configurable": {"thread_id": th.id}})),
        }
        for read, call in reads.items():
            try:
                got = call()
            except ThreadLostError as exc:
                if exc.thread_id != th.id:
                    fail("evict_whole.error", f"{read} of {th.id!r} named {exc.thread_id!r}")
                if self.now >= th.noted_until:
                    fail("evict_whole.false_alarm", f"{read} of {th.id!r}: {exc}")
                continue
            if got:
                fail("evict_whole.extra", f"{read} of {th.id!r} returned {got}")
            if self.now < th.due_until:
                fail("evict_whole.silent", f"{read} of {th.id!r} read as a new thread")
        self.saver.delete_thread(th.id)
        self.reset(th)

    @rule(runs=st.lists(st.sampled_from((*RUNS, "run-x")), min_size=1, max_size=2, unique=True))
    def delete_for_runs(self, runs: list[str]) -> None:
        self.saver.delete_for_runs(runs)
        for th in self.threads.values():
            for key, cp in list(th.cps.items()):
                if cp.metadata.get("run_id") in runs:
                    del th.cps[key]

    @precondition(lambda self: any(th.cps for th in self.threads.values()))
    @rule(source=picks, onto=st.none() | picks)
    def copy_thread(self, source: int, onto: int | None) -> None:
        sources = [th for th in self.threads.values() if th.cps]
        src = sources[source % len(sources)]
        if onto is None and self.copies < MAX_COPIES:
            self.copies += 1
            dst = self.threads.setdefault(f"copy{self.copies}", Thread(f"copy{self.copies}"))
        else:
            others = [th for th in self.threads.values() if th is not src]
            dst = others[(onto or 0) % len(others)]
        self.settle(src)  # what is still there now is what gets copied
        self.saver.copy_thread(src.id, dst.id)
        if not src.cps:
            return
        ttl = self.ttl_of(dst)
        for key, cp in src.cps.items():
            new = copy.deepcopy(cp)
            new.alive_until = self.now + ttl
            new.anchor = self.now
            for w in new.writes.values():
                if w.alive_until > self.now:
                    w.alive_until = self.now + ttl
            dst.cps[key] = new  # records with the same ids are replaced, writes included
        self.touch(dst, ttl)

    @precondition(
        lambda self: (
            self.keep_last is not None
            and not self.refresh  # (a refreshing read would renew what the model bounds)
            and any(th.cps for th in self.threads.values())
        )
    )
    @rule(pick=picks)
    def migrate_keep_last_source(self, pick: int) -> None:
        """A keep_last source migrated into a fresh prefix: the report says copied and
        verified, and the copy holds what the model holds, each checkpoint whole, with its
        pending writes in order (their task paths copied), and nothing else."""
        from langgraph.checkpoint.rediskv.migrate import migrate

        sources = [th for th in self.threads.values() if th.cps]
        th = sources[pick % len(sources)]
        self.settle(th)  # what is still there now is what gets copied
        if not th.cps:
            return
        target_prefix = new_prefix()
        try:
            with saver_with_limits(
                self.server_url, self.limits, prefix=target_prefix, cluster=self.cluster
            ) as target:
                (entry,) = migrate(self.saver, target, threads=[th.id]).threads
                if (entry.status, entry.verified, entry.problems) != ("copied", True, []):
                    fail("migrate.report", f"{th.id!r}: {entry}")
                for cp in th.cps.values():
                    got = target.get_tuple(cfg(th.id, cp.ns, cp.id))
                    if got is None:
                        fail("migrate.missing", f"{th.id!r} {cp.ns!r} {cp.id}")
                        continue
                    self.check_tuple("migrate", got, th, cp)
                    self.check_writes("migrate", got, th, cp)
                found = target.list({"configurable": {"thread_id": th.id}})
                configs = [t.config["configurable"] for t in found]
                listed = {(c["checkpoint_ns"], c["checkpoint_id"]) for c in configs}
                if listed != set(th.cps):
                    fail("migrate.list", f"{th.id!r}: {sorted(listed ^ set(th.cps))} differ")
        finally:
            keys = list(self.client.scan_iter(match=f"{target_prefix}:*", count=1000))
            for start in range(0, len(keys), 1000):
                self.client.unlink(*keys[start : start + 1000])

    @rule(
        threads=st.lists(picks, min_size=1, max_size=2),
        strategy=st.sampled_from(("keep_latest", "delete_all")),
    )
    def prune(self, threads: list[int], strategy: str) -> None:
        chosen = list({self.pick_thread(p).id: self.pick_thread(p) for p in threads}.values())
        for th in chosen:
            self.settle(th)  # the latest is the latest of what is still there
        self.saver.prune([th.id for th in chosen], strategy=strategy)
        for th in chosen:
            if strategy == "delete_all":
                self.reset(th)
                continue
            latest: dict[str, Cp] = {}
            for cp in th.cps.values():
                if cp.ns not in latest or cp.id > latest[cp.ns].id:
                    latest[cp.ns] = cp
            th.cps = {(cp.ns, cp.id): cp for cp in latest.values()}

    @precondition(lambda self: any(th.cps for th in self.threads.values()))
    @rule(
        pick=picks,
        how=st.sampled_from(("noise", "cut", "first layout")),
        noise=st.binary(min_size=1, max_size=300),
        then=st.sampled_from(("delete_thread", "prune", "delete_for_runs", "copy_thread")),
        onto=picks,
    )
    def corrupt_record(self, pick: int, how: str, noise: bytes, then: str, onto: int) -> None:
        live = [(th, cp) for th in self.threads.values() for cp in th.cps.values() if self.must(cp)]
        if not live:
            return
        th, cp = live[pick % len(live)]
        keys = self.saver._core.keys
        key = keys.checkpoint(keys.tag(th.id), cp.ns, cp.id)
        packed = self.client.get(key)
        assert isinstance(packed, bytes), key
        if how == "noise":
            spoiled = b"x" + noise  # (not a field header)
        elif how == "cut":
            spoiled = packed[:-3]
        else:  # the first string layout: <name> NUL <length> NUL <value>
            spoiled = b"".join(
                b"%s\0%d\0%s" % (name, len(value), value)
                for name, value in parse_record(packed).items()
            )
        self.client.set(key, spoiled, keepttl=True)
        named = f"^corrupt checkpoint record {re.escape(key)}: "
        with pytest.raises(ValueError, match=named):
            self.prober.get_tuple(cfg(th.id, cp.ns, cp.id))
        # the checker names it; the blobs only it listed are not orphans (doctor --repair
        # leaves them): only an unreadable record may reference them
        problems = [(p.problem, p.key) for p in self.saver.check_invariants() if not p.stale]
        if ("unreadable record", key) not in problems:
            fail("corrupt_record.unreported", f"{key}: {problems[:8]}")
        tag = keys.tag(th.id)
        others = [p for p in problems if p != ("unreadable record", key)]
        if any(problem != UNREADABLE_BLOB or f":blob:{tag}:" not in k for problem, k in others):
            fail("corrupt_record.problems", f"{key}: {others[:8]}")
        if then == "prune":
            self.saver.prune([th.id])
        elif then == "delete_for_runs":
            run = cp.metadata.get("run_id", "run-x")
            self.saver.delete_for_runs([run])
            for other in self.threads.values():
                if other is not th:
                    for k, c in list(other.cps.items()):
                        if c.metadata.get("run_id") == run:
                            del other.cps[k]
        elif then == "copy_thread":
            others_th = [t for t in self.threads.values() if t is not th]
            dst = others_th[onto % len(others_th)]
            before = {k: self.client.dump(k) for k in self.keys_by_thread()[1][dst.id]}
            with pytest.raises(ValueError, match=f"refused: unreadable record {re.escape(key)}"):
                self.saver.copy_thread(th.id, dst.id)
            after = {k: self.client.dump(k) for k in self.keys_by_thread()[1][dst.id]}
            if after != before:
                fail("corrupt_record.copy", f"the target {dst.id!r} changed")
        if then != "delete_thread":
            # the job is done (no gc root left), and a record whose small fields cannot be
            # read is where it was (one cut in its last field is read and removed as any)
            if self.client.exists(keys.gc(tag)):
                fail(f"corrupt_record.{then}", f"{key}: a job left")
            if how != "cut" and self.client.get(key) != spoiled:
                fail(f"corrupt_record.{then}", f"{key} changed")
        self.saver.delete_thread(th.id)
        self.reset(th)  # the oracle: no key of the thread is left

    # -- expiry ------------------------------------------------------------------------------
    def renew_all(self, th: Thread, ttl: float) -> None:
        """set_thread_ttl/pin/unpin: every key of the thread gets ``ttl`` from now."""
        self.settle(th)
        for cp in th.cps.values():
            cp.alive_until = self.now + ttl
            cp.anchor = self.now
            for w in cp.writes.values():
                if w.alive_until > self.now:
                    w.alive_until = self.now + ttl
        th.gone_after = self.now + ttl
        if ttl < INF:
            self.finite_gone_after = max(self.finite_gone_after, self.now + ttl)

    @rule(thread=picks)
    def pin_thread(self, thread: int) -> None:
        th = self.pick_thread(thread)
        self.saver.pin_thread(th.id)
        self.forgotten(th)
        th.own = 0
        th.clean = False  # the setting is a key of the thread
        self.renew_all(th, INF)

    @rule(thread=picks)
    def unpin_thread(self, thread: int) -> None:
        th = self.pick_thread(thread)
        self.saver.unpin_thread(th.id)
        self.forgotten(th)
        th.own = None
        if not th.clean:
            self.renew_all(th, self.ttl_of(th))

    @rule(thread=picks, minutes=st.sampled_from((0.5, 1, 2)))
    def set_thread_ttl(self, thread: int, minutes: float) -> None:
        th = self.pick_thread(thread)
        self.saver.set_thread_ttl(th.id, minutes)
        self.forgotten(th)
        self.ttl_set(th, int(minutes * 60))
        th.own = int(minutes * 60)
        th.clean = False
        self.renew_all(th, th.own)

    @rule(
        ttl=st.sampled_from(TTLS),
        index=st.sampled_from(INDEXES),
        keep=st.sampled_from(KEEP_LAST),
    )
    def recreate(
        self, ttl: tuple[float, bool] | None, index: tuple[str, ...], keep: int | None
    ) -> None:
        self.saver.close()
        options = None if ttl is None else {"default_ttl": ttl[0], "refresh_on_read": ttl[1]}
        self.saver = self.new_saver(ttl=options, index_metadata=index, keep_last=keep)
        self.keep_last = keep
        self.saver_ttl = None if ttl is None else int(ttl[0] * 60)
        self.refresh = ttl is not None and ttl[1]
        self.indexed = index
        if self.saver_ttl is not None:
            # a later put may give shared blobs and indexes this shorter expiry; what was
            # written without any ttl keeps none
            for th in self.threads.values():
                if th.own is None:
                    for cp in th.cps.values():
                        if cp.alive_until < INF:
                            cp.alive_until = min(cp.alive_until, cp.anchor + self.saver_ttl)

    @rule(seconds=st.sampled_from(ADVANCES))
    def advance(self, seconds: int) -> None:
        advance_time(self.client, self.prefix, seconds)
        self.now += seconds
        # (the registry's deadlines moved earlier with the keys' expiries: what a saver noted
        # is then as old as after that time really passed, and its next put notes again)
        self.saver._core.noted_deadlines.threads.clear()
        _, by_thread = self.keys_by_thread()
        for th in self.threads.values():
            if not th.clean and self.now >= th.gone_after:
                if by_thread[th.id]:
                    fail(
                        "expiry.thread_not_gone",
                        f"{th.id!r} idle past its ttl (gone after {th.gone_after}, now "
                        f"{self.now}) still has {sorted(by_thread[th.id])[:6]}",
                    )
                self.reset(th)
        for th in self.threads.values():
            self.settle(th)

    @precondition(lambda self: not self.cluster)  # the cluster's nodes take 512 MB values
    @rule(picks=st.lists(st.integers(0, 99), min_size=2, max_size=5), at=st.integers(0, 5))
    def concurrent_puts_with_an_oversized_value(self, picks: list[int], at: int) -> None:
        """Graphs write at once through an AsyncRedisSaver (auto-pipelined); one of the puts
        holds a value over the server's proto-max-bulk-len (1 MB here): that put alone fails,
        with ValueTooLargeError, and writes nothing; the others are stored whole."""
        queued: list[tuple[Any, ...]] = []

        def queue(config: Any, checkpoint: Any, metadata: Any, versions: Any) -> Any:
            queued.append((config, checkpoint, metadata, versions))
            conf = config["configurable"]
            return cfg(conf["thread_id"], conf["checkpoint_ns"], checkpoint["id"])

        for pick in picks:
            th = self.pick_thread(pick)
            live = self.live_cps(th, "")
            md = self.metadata("loop", len(live), "run-big", None, None)
            self.put_one(th, "", live[-1] if live else None, {"messages"}, md, send=queue)
        big = empty_checkpoint()
        big["id"] = self.next_id()
        big["channel_values"] = {"document": os.urandom(MAX_BULK + 1)}  # incompressible
        big["channel_versions"] = {"document": self.saver.get_next_version(None, None)}
        oversized = (
            cfg(self.pick_thread(at).id, "", None),
            big,
            {"source": "loop", "step": 0},
            dict(big["channel_versions"]),
        )
        queued.insert(min(at, len(queued)), oversized)
        options = (
            None
            if self.saver_ttl is None
            else {"default_ttl": self.saver_ttl / 60, "refresh_on_read": self.refresh}
        )

        async def write_at_once() -> list[Any]:
            async with AsyncRedisSaver.from_settings(
                SaverSettings.from_kwargs(
                    self.server_url,
                    prefix=self.prefix,
                    ttl=options,
                    index_metadata=self.indexed,
                    keep_last=self.keep_last,
                    limits=self.limits,
                )
            ) as writer:
                return await asyncio.gather(
                    *(writer.aput(*args) for args in queued), return_exceptions=True
                )

        results = asyncio.run(write_at_once())
        failed = [(i, type(r).__name__) for i, r in enumerate(results) if isinstance(r, Exception)]
        if failed != [(queued.index(oversized), "ValueTooLargeError")]:
            fail("oversized_among_concurrent", f"failures {failed}, {results}")
        for pick in picks:  # in whatever order the puts ran
            self.trim(self.pick_thread(pick), "", exact=False)

    # -- invariants --------------------------------------------------------------------------
    @invariant()
    def store_is_consistent(self) -> None:
        problems = self.saver.check_invariants()
        if self.finite_gone_after > -INF:
            # a ttl was given: entries whose key expired are expected until swept (stale)
            problems = [p for p in problems if not p.stale]
        if problems:
            fail("check_invariants", f"{[str(p) for p in problems][:8]}")
        keys, by_thread = self.keys_by_thread()
        for th in self.threads.values():
            if th.clean and by_thread[th.id]:
                fail("thread_keys_left", f"{th.id!r} must have no key: {by_thread[th.id][:6]}")
        # the registry of live threads holds as due only threads a put noted (never one
        # deleted, or past its deadline: a false alarm), and every thread that must be
        now_seconds = int(self.client.time()[0])
        due = {
            tag.decode()
            for tag, deadline in self.client.zrange(f"{self.prefix}:alive", 0, -1, withscores=True)
            if deadline > now_seconds
        }
        keys_of = self.saver._core.keys
        for th in self.threads.values():
            tag = keys_of.tag(th.id)
            if tag in due and self.now >= th.noted_until:
                fail("registry.false_alarm", f"{th.id!r} is due in P:alive, noted long ago")
            if tag not in due and self.now < th.due_until:
                fail("registry.missing", f"{th.id!r} is not due in P:alive")
        everything_gone = all(th.clean for th in self.threads.values())
        if everything_gone and self.now >= self.finite_gone_after:
            # a shared metadata index may keep entries of expired checkpoints until a read or
            # a put meets them (docs/ttl.md): only such entries may be left
            left = [k for k in keys if not self.only_stale_members(k)]
            if left:
                fail("prefix_keys_left", f"every thread is gone, yet {sorted(left)[:6]}")

    def only_stale_members(self, key: str) -> bool:
        """A global metadata index whose every member names a checkpoint that is gone, or a
        threads-by-value index whose every member names a thread that is gone."""
        keys = self.saver._core.keys
        if keys.is_threads_with(key):
            # (a cluster's members are "{T}<incarnation>")
            tags = [m[: m.index(b"}") + 1] for m in self.client.zrange(key, 0, -1)]
            return not any(self.client.exists(keys.thread(tag.decode())) for tag in tags)
        if not keys.is_metadata_index(key):
            return False
        for member in self.client.zrange(key, 0, -1):
            checkpoint_id, _, rest = member.decode().rpartition("\0")
            tag, _, ns = rest.partition("}:")
            if self.client.exists(keys.checkpoint(tag + "}", decode_part(ns), checkpoint_id)):
                return False
        return True


def _settings() -> settings:
    examples = int(os.environ.get("RSKV_MODEL_EXAMPLES", "0"))
    steps = int(os.environ.get("RSKV_MODEL_STEPS", "0"))
    return settings(
        max_examples=examples or 30,
        stateful_step_count=steps or (50 if examples else 30),
        deadline=None,
        suppress_health_check=list(HealthCheck),
        print_blob=True,
    )


# The model runs on a server of its own whose proto-max-bulk-len is 1 MB (the lowest Redis
# allows), so that an oversized value is cheap to make.
MAX_BULK = 1 << 20


@pytest.fixture(scope="module")
def small_bulk_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    server = PrivateServer(
        tmp_path_factory.mktemp("model"), **{"proto-max-bulk-len": str(MAX_BULK)}
    ).start()
    yield server.url
    server.stop()


@pytest.fixture(autouse=True)
def _server(small_bulk_server: str, monkeypatch: pytest.MonkeyPatch) -> None:
    SaverMachine.server_url = small_bulk_server
    # values from 200 bytes on are stored against bases (1 KB by default): most of the
    # machine's messages and summaries are, so every rule runs over reference compression
    # list(None) over more than 2 threads keeps the next id of each and pages of 2 at most
    # (Limits.list_window is 256): the global listings run over heads and pages read on
    # demand. list(None) over every thread in small steps: SCAN steps of a few keys, first
    # pages of 2 checkpoints for 2 threads at a time, with a limit ids chosen 2 a thread at
    # first and about 4 a round trip
    small = Limits(
        ref_min_size=200,
        list_window=2,
        scan_count=10,
        first_page=2,
        thread_group=2,
        first_ids=2,
        select_ids=4,
    )
    SaverMachine.limits = small  # (every saver the machine makes)


SaverMachine.TestCase.settings = _settings()
TestSaverModel = SaverMachine.TestCase
TestSaverModel.pytestmark = [pytest.mark.slow]


class ClusterSaverMachine(SaverMachine):
    """The same machine on the suite's 3-node cluster, with slot moves as steps."""

    cluster = True
    local_cluster: ClassVar[LocalCluster | None] = None

    @rule(
        pick=st.integers(0, 99),
        moved_first=st.sampled_from((0, 3, 1000)),
        changed=st.sets(st.sampled_from(CHANNELS), max_size=2),
    )
    def put_while_its_slot_moves(self, pick: int, moved_first: int, changed: set[str]) -> None:
        """Resharding moves the thread's slot to another node while a put runs: the put
        waits for the move (the server refuses it with TRYAGAIN until then) and is stored
        whole on the new node."""
        assert self.local_cluster is not None
        th = self.pick_thread(pick)
        tag = self.saver._core.keys.tag(th.id)
        slot = int(self.client.execute_command("CLUSTER", "KEYSLOT", f"x:{tag}"))
        with slot_moving(self.local_cluster, slot, moved_first, 0.3):
            live = self.live_cps(th, "")
            md = self.metadata("loop", len(live), "run-move", None, None)
            self.put_one(th, "", live[-1] if live else None, {"messages", *changed}, md)


@pytest.fixture
def _cluster(local_cluster: LocalCluster) -> None:
    ClusterSaverMachine.server_url = local_cluster.url
    ClusterSaverMachine.local_cluster = local_cluster


ClusterSaverMachine.TestCase.settings = settings(
    _settings(), max_examples=int(os.environ.get("RSKV_MODEL_EXAMPLES", "0")) or 8
)


@pytest.mark.usefixtures("_cluster")
@pytest.mark.slow
class TestSaverModelOnCluster(ClusterSaverMachine.TestCase):  # type: ignore[misc,valid-type]
    pass
