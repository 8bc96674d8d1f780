"""Threads-by-value lists on a Redis Cluster, free of I/O (the generator style of :mod:`.requests`).

A cluster keeps the lists ``P:tm:S`` as a standalone server does (the threads that have a
checkpoint with metadata value S, each scored at least by the newest of them), so that
``list(None, filter)`` and ``delete_for_runs`` visit only the threads that may match. A
thread's script cannot write them (they live in other slots), so the client writes a thread's
entry *before* the checkpoints that need it, and the thread's own ``P:tb:{T}`` records what its
entries hold; a script refuses a checkpoint that its entries do not cover yet
(``{"INDEX", inc, S, score, ...}``), and the client writes them and sends the call again.
The protocol, and why a stale entry can always be removed: ``lua/include/lists.lua``.

Run ids get lists too (``S`` = ``/<encoded run id>``): delete_for_runs, and a filter on
``run_id``, visit the run's threads only.
"""

from __future__ import annotations

import math
import secrets
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..keys import encode_part, metadata_index_suffix
from ..replies import INDEX
from . import calls
from .requests import Batch, NodeBatch, Op, ScriptCall
from .rules import thread_indexed
from .state import CoreState

# A thread's entry is written with a score this far above the checkpoint that needs it, so
# that the checkpoints of the next seconds (a run's supersteps) need no new write: 10 seconds
# in id_score() units (25.6 us each). The cost: a list(None, filter, limit) may visit the
# threads written in the last 10 seconds before it can stop, as their scores are that loose.
LIST_MARGIN = 390_625
# When a put writes entries ahead anyway (a new run, a new value), it renews those of its
# other lists that have less than this left, in the same round trip.
LIST_RENEW = LIST_MARGIN // 2
# A list nobody wrote to for an hour (id_score() units) is swept by the next write-ahead: a
# sample of SWEEP_SAMPLE members is checked, entries of gone incarnations removed, an empty
# list forgotten. Lists never expire (a thread in one may outlive any write-ahead), so the
# lists of values no thread uses any more, and of threads that expired, go this way.
LIST_IDLE = 3600 * 39_062
SWEEP_SAMPLE = 32


def run_suffix(run_id: str) -> str:
    """The list of a run's threads."""
    return "/" + encode_part(run_id)


def score_arg(score: float) -> str:
    """A score as the scripts take it (score_arg in lua/include/keyschema.lua)."""
    return "inf" if math.isinf(score) else str(int(score))


@dataclass
class Ahead:
    """One operation's write-ahead: the incarnation it wrote under ("": none yet) and the
    bounds written, which go with its call as the hint."""

    inc: str = ""
    bounds: dict[str, float] = field(default_factory=dict)

    def hint(self) -> str:
        """ARGV's "~<inc>;<S=bound,...>;<candidate>": the candidate is the incarnation of a
        thread that has none, a new random word on every call (lua/include/lists.lua)."""
        written = ",".join(f"{s}={score_arg(b)}" for s, b in self.bounds.items())
        return f"~{self.inc};{written};{secrets.token_hex(4)}"


def needs_of(
    filter_fields: Iterable[tuple[str, str]], run_id: str | None, score: float
) -> dict[str, float]:
    """The lists a checkpoint needs (as add_list_needs() in lua/include/lists.lua finds them):
    ``filter_fields`` are its (metadata key, canonical JSON) pairs."""

    needs = {
        metadata_index_suffix(key, canonical): score
        for key, canonical in filter_fields
        if thread_indexed(key, canonical)
    }
    if run_id is not None:
        needs[run_suffix(run_id)] = score
    return needs


def before_put(core: CoreState, tag: str, needs: dict[str, float], ahead: Ahead) -> Op[None]:
    """Write the entries a put needs ahead when this saver knows the thread's incarnation and
    its entries fall short (a new run, a new value, the margin used up): one round trip
    instead of a refused call and then one."""
    known = core.list_cache.get(tag)
    if known is None:
        return
    inc, bounds = known
    short = {s: score for s, score in needs.items() if bounds.get(s, -math.inf) < score}
    if short:
        ahead.inc = inc
        renew = {s: sc for s, sc in needs.items() if bounds.get(s, -math.inf) < sc + LIST_RENEW}
        yield from _enter(core, tag, ahead, {**renew, **short})


def answer(core: CoreState, tag: str, reply: Sequence[bytes], ahead: Ahead) -> Op[None]:
    """Write the entries an ``INDEX`` reply asks for; the call goes again with ``ahead``."""
    inc = reply[1].decode()
    if inc != ahead.inc:
        ahead.inc, ahead.bounds = inc, {}
    wanted = {s.decode(): float(score) for s, score in zip(reply[2::2], reply[3::2], strict=True)}
    yield from _enter(core, tag, ahead, wanted)


def is_index_reply(reply: Any) -> bool:
    return isinstance(reply, list) and len(reply) > 1 and reply[0] == INDEX


def _enter(core: CoreState, tag: str, ahead: Ahead, wanted: dict[str, float]) -> Op[None]:
    """Enter the thread in the lists it wants, scored a margin above, and the lists in the
    registry, in one pipeline; then check the members the lists sampled, and sweep the lists
    the registry names as idle."""

    member = tag + ahead.inc
    entries = []
    registered: list[str] = []
    for suffix, score in wanted.items():
        bound = score + LIST_MARGIN
        ahead.bounds[suffix] = bound
        entries.append(
            calls.enter_thread_list(
                core.keys.threads_with(suffix), member=member, score=score_arg(bound)
            )
        )
        registered += [score_arg(bound), suffix]
    idle_below = score_arg(max(wanted.values()) - LIST_IDLE)
    registry = calls.thread_list_registry(
        core.keys.lists_registry(), mode="enter", operands=(idle_below, *registered)
    )
    *replies, idle = yield Batch([*entries, registry])
    core.list_cache.put(tag, ahead.inc, ahead.bounds)
    # two members of each list that grew, checked: those of a gone incarnation are removed
    sampled = {
        (call.keys[0], other)
        for call, others in zip(entries, replies, strict=True)
        for other in others
    }
    if sampled:
        yield from _remove_dead(core, sampled)
    if idle:
        lists = [(s.decode(), score) for s, score in zip(idle[::2], idle[1::2], strict=True)]
        yield from _sweep(core, lists, score_arg(max(wanted.values())))


def _remove_dead(core: CoreState, entries: set[tuple[str, bytes]]) -> Op[dict[str, int]]:
    """Remove the entries (list key, member) whose incarnation is gone; returns, for each list
    that had such entries, the number of members left."""

    members = sorted({member for _, member in entries})
    states = yield Batch([state_call(core, _tag(m)) for m in members])
    live = {m for m, state in zip(members, states, strict=True) if _inc_of(m) == state[0]}
    dead: dict[str, list[bytes]] = {}
    for key, m in sorted(entries):
        if m not in live:
            dead.setdefault(key, []).append(m)
    if not dead:
        return {}
    left = yield Batch(
        [calls.sweep_thread_list(key, mode="remove", operands=ms) for key, ms in dead.items()]
    )
    return dict(zip(dead, (int(n) for n in left), strict=True))


def _sweep(core: CoreState, idle: list[tuple[str, bytes]], now: str) -> Op[None]:
    """Sweep lists nobody wrote to for LIST_IDLE: a sample of each is checked and the entries
    of gone incarnations removed; an empty list leaves the registry, one with members goes
    to its back (lua/thread_list_registry.lua)."""

    keys = [core.keys.threads_with(suffix) for suffix, _ in idle]
    samples = yield Batch(
        [calls.sweep_thread_list(key, mode="sample", operands=(SWEEP_SAMPLE,)) for key in keys]
    )
    entries = {(key, m) for key, sample in zip(keys, samples, strict=True) for m in sample}
    left = (yield from _remove_dead(core, entries)) if entries else {}
    swept: list[str | bytes] = []
    for (suffix, read), key, sample in zip(idle, keys, samples, strict=True):
        swept += [suffix, read, str(left.get(key, len(sample)))]
    yield calls.thread_list_registry(
        core.keys.lists_registry(), mode="swept", operands=(now, *swept)
    )


def state_call(core: CoreState, tag: str, what: str | None = None) -> ScriptCall:
    """What a thread's P:tb holds (lua/thread_lists.lua): its incarnation and lists; with a
    list S, its incarnation and newest score with S; with "*", every field."""

    return calls.thread_lists(core.keys.thread_bounds(tag), list_suffix=what)


def _inc_of(member: bytes) -> bytes:
    return member[member.index(b"}") + 1 :]


def tag_of_member(member: bytes) -> bytes:
    """A list member's thread tag (a standalone server's members are the tag alone)."""
    return member[: member.index(b"}") + 1]


def probe(
    core: CoreState, suffix: str, asked: Sequence[tuple[str, float, bytes]]
) -> Op[list[tuple[str, float]]]:
    """The newest score with value ``suffix`` of each thread asked (thread id, list score,
    list member), in one round trip: a thread's list score is loose by LIST_MARGIN, this is the
    highest id_score() of its checkpoints with the value (an upper bound too: checkpoints
    deleted since may have had it). Threads whose member is of a gone incarnation are left
    out, and their members removed from the list; so are threads that have the entry but
    no such checkpoint (a put that wrote ahead and never came)."""

    # (on a cluster, one call per node: lua/thread_states.lua)
    asks = [state_call(core, _tag(member), suffix) for _, _, member in asked]
    # the transport adds each node's threads' keys to the node's call
    node_call = calls.thread_states(list_suffix=suffix, thread_bounds=())
    states = yield NodeBatch(asks, node_call.name, node_call.args)
    newest: list[tuple[str, float]] = []
    dead: list[bytes] = []
    for (thread_id, _, member), (inc, score) in zip(asked, states, strict=True):
        if inc != _inc_of(member):
            dead.append(member)
        elif score is not None:
            newest.append((thread_id, float(score)))
    if dead:
        yield calls.sweep_thread_list(core.keys.threads_with(suffix), mode="remove", operands=dead)
    return newest


def _tag(member: bytes) -> str:
    return tag_of_member(member).decode()


def missing_entries(core: CoreState, tags: Sequence[str]) -> Op[list[tuple[str, str, str, float]]]:
    """The entries the threads' bounds (P:tb) say their lists hold and the lists do not, with
    at least the bound's score, as (thread tag, incarnation, list S, bound). A failover of a
    list's node loses an entry its replica had not received yet, while the thread's node,
    another, keeps the bound: its puts then write nothing ahead into that list again."""

    missing: list[tuple[str, str, str, float]] = []
    for start in range(0, len(tags), core.limits.batch_size):
        chunk = tags[start : start + core.limits.batch_size]
        states = yield Batch([state_call(core, tag, "*") for tag in chunk])
        wanted: list[tuple[str, str, str, float]] = []
        for tag, flat in zip(chunk, states, strict=True):
            fields = {f.decode(): v.decode() for f, v in zip(flat[::2], flat[1::2], strict=True)}
            inc = fields.pop("", None)
            if inc is None:
                continue
            wanted += [(tag, inc, s, float(b)) for s, b in fields.items() if not s.startswith("@")]
        if not wanted:
            continue
        scores = yield Batch(
            [
                calls.sweep_thread_list(
                    core.keys.threads_with(s), mode="score", operands=(tag + inc,)
                )
                for tag, inc, s, _ in wanted
            ]
        )
        for entry, score in zip(wanted, scores, strict=True):
            if score is None or float(score) < entry[3]:
                missing.append(entry)
    return missing


def enter_missing(core: CoreState, tags: Sequence[str]) -> Op[int]:
    """Enter again the entries the threads' bounds name and their lists lost (see
    missing_entries), with the bounds' scores; returns how many."""
    missing = yield from missing_entries(core, tags)
    by_thread: dict[tuple[str, str], dict[str, float]] = {}
    for tag, inc, suffix, bound in missing:
        by_thread.setdefault((tag, inc), {})[suffix] = bound - LIST_MARGIN
    for (tag, inc), wanted in by_thread.items():
        yield from _enter(core, tag, Ahead(inc), wanted)
    return len(missing)


def forget_threads(core: CoreState, thread_ids: Sequence[str], delete: Op[None]) -> Op[None]:
    """Run ``delete`` (of whole threads), then take the threads' entries of the incarnations
    it ended out of their lists. (Entries of a thread that expired go when a write-ahead into
    their list samples them, a reader's probe meets them, or the list's sweep once idle.)"""

    tags = [core.keys.tag(t) for t in thread_ids]
    states: list[Any] = []
    for start in range(0, len(tags), core.limits.batch_size):
        states += yield Batch(
            [state_call(core, tag) for tag in tags[start : start + core.limits.batch_size]]
        )
    yield from delete
    removals = [
        calls.sweep_thread_list(
            core.keys.threads_with(s.decode()), mode="remove", operands=(tag + inc.decode(),)
        )
        for tag, (inc, *suffixes) in zip(tags, states, strict=True)
        if inc
        for s in suffixes
    ]
    for tag in tags:
        core.list_cache.drop(tag)
    for start in range(0, len(removals), core.limits.batch_size):
        yield Batch(removals[start : start + core.limits.batch_size])
