"""Whole-thread operations in bounded steps, free of I/O (the generator style of :mod:`.requests`).

delete_thread, prune, delete_for_runs, set_thread_ttl and copy_thread touch every key of a
thread, which may be hundreds of thousands. A script that did it in one call would hold the
server for seconds (other clients get ``BUSY``), so each is a *job* (``lua/include/reap.lua``):
a first script call makes the change visible at once and registers the job in the thread's gc
root, then ``reap_thread`` calls do the rest, each within a budget of work. Jobs live in Redis,
so a job whose client died is finished by the next writer of the thread, delete or invariant
check. copy_thread reads the source a chunk at a time and writes the target a chunk at a time;
a new target appears whole when the copy is published.
"""

from __future__ import annotations

import contextlib
import secrets
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from ..errors import CopyInterruptedError, ServerFullError
from ..keys import encode_part
from . import calls, cluster_lists, deadlines, discovery
from .requests import Arg, Batch, Op, ScriptCall
from .state import CoreState

# (their tuning: Limits.reap_step, export_checkpoints, export_bytes, run_chunk, batch_size)
# prune's strategies, and the job each one runs on a thread
PRUNE_STRATEGIES = {
    "keep_latest": "prune",
    "delete_all": "delete_thread",
    "delete": "delete_thread",
}
START_CURSOR: tuple[str, str, str, str] = ("0", "0", "", "")


def require_list(values: Any, what: str) -> None:
    """A str (or bytes) where a list is expected would be taken character by character."""
    if isinstance(values, (str, bytes, bytearray)):
        raise TypeError(
            f"{what} must be a list of strings, not a single {type(values).__name__} "
            f"({values!r}): pass [{values!r}]"
        )


def reap_call(core: CoreState, tag: str, only: tuple[str, str] | None = None) -> ScriptCall:
    """One step of the thread's pending jobs; ``only``: (job, token), that job alone, while
    it is pending under that token (a copy discarding its own job: reap_thread.lua)."""
    job, token = only or (None, None)
    return calls.reap_thread(
        core.keys.gc(tag),
        prefix=core.keys.prefix,
        tag=tag,
        budget=core.limits.reap_step,
        job=job,
        token=token,
    )


def job_call(
    core: CoreState,
    build: Callable[..., ScriptCall],
    thread_id: str,
    budget: int | None = None,
    **extra: Any,
) -> tuple[str, ScriptCall]:
    """The first call of a job, by its builder (calls.delete_thread, prune, delete_for_runs):
    KEYS (root, runs, gc), ARGV (prefix, tag, budget (limits.reap_step unless given), ...)."""
    tag = core.keys.tag(thread_id)
    budget = core.limits.reap_step if budget is None else budget
    keys = (core.keys.thread(tag), core.keys.runs(tag), core.keys.gc(tag))
    return tag, build(*keys, prefix=core.keys.prefix, tag=tag, budget=budget, **extra)


def finish_reaping(core: CoreState, thread_id: str) -> Op[None]:
    """Reap, in bounded steps, every job pending on the thread (also one whose client died
    midway); writers call this when their script replies "REAPING"."""
    yield from reap_tag(core, core.keys.tag(thread_id))


def run_jobs(core: CoreState, first_calls: Iterable[tuple[str, ScriptCall]]) -> Op[None]:
    """Send each thread's first call, then reap every thread whose reply says work is left,
    until none is. Many threads go out in pipelines, one step of each per round trip."""
    calls = list(first_calls)
    if len(calls) == 1:  # one thread: plain calls (a pipeline would load the scripts first)
        tag, call = calls[0]
        if (yield call):
            yield from reap_tag(core, tag)
        return
    pending = [tag for tag, _ in calls]
    replies: list[Any] = []
    for start in range(0, len(calls), core.limits.batch_size):
        replies += yield Batch([call for _, call in calls[start : start + core.limits.batch_size]])
    while True:
        pending = [tag for tag, reply in zip(pending, replies, strict=True) if reply]
        if not pending:
            return
        replies = []
        for start in range(0, len(pending), core.limits.batch_size):
            chunk = pending[start : start + core.limits.batch_size]
            replies += yield Batch([reap_call(core, tag) for tag in chunk])


def reap_tag(core: CoreState, tag: str, only: tuple[str, str] | None = None) -> Op[None]:
    call = reap_call(core, tag, only)
    while (yield call):
        pass


def delete_thread(core: CoreState, thread_id: str) -> Op[None]:
    yield from _delete_threads(core, [str(thread_id)])
    core.bases.drop_thread(core.keys.tag(thread_id))  # gone with the thread


def prune(core: CoreState, thread_ids: Sequence[str], strategy: str = "keep_latest") -> Op[None]:
    script = PRUNE_STRATEGIES.get(strategy)
    if script is None:
        raise ValueError(f"unknown prune strategy {strategy!r}: use 'keep_latest' or 'delete_all'")
    require_list(thread_ids, "prune's thread_ids")
    if script == "delete_thread":
        yield from _delete_threads(core, [str(t) for t in thread_ids])
        for thread_id in thread_ids:
            core.bases.drop_thread(core.keys.tag(thread_id))  # gone with the threads
    else:
        yield from run_jobs(core, (job_call(core, calls.prune, str(t)) for t in thread_ids))


def _delete_threads(core: CoreState, thread_ids: list[str]) -> Op[None]:
    tags = [core.keys.tag(t) for t in thread_ids]
    # out of the registry of live threads before (so that no failure midway leaves a deleted
    # thread due) and after (a put meanwhile may have noted it again)
    yield from deadlines.forget(core, tags, deleted=True)
    delete = run_jobs(core, (job_call(core, calls.delete_thread, t) for t in thread_ids))
    if core.cluster_lists:  # their entries in the lists go after them
        yield from cluster_lists.forget_threads(core, thread_ids, delete)
    else:
        yield from delete
    yield from deadlines.forget(core, tags, deleted=True)


def delete_for_runs(core: CoreState, run_ids: Sequence[str]) -> Op[None]:

    require_list(run_ids, "delete_for_runs' run_ids")
    if not run_ids:
        return
    encoded = [encode_part(str(r)) for r in run_ids]
    thread_ids: list[str] | None = None
    if core.cluster_lists and (yield from discovery.lists_ready(core)):
        thread_ids = yield from discovery.threads_of_runs(core, [str(r) for r in run_ids])
    elif core.global_index:  # run_id's metadata index, when it is complete
        thread_ids = yield from discovery.threads_in_run_index(core, [str(r) for r in run_ids])
    if thread_ids is None:
        thread_ids = yield from discovery.scan_thread_ids(core)
    # many runs go a chunk per call; all but the last chunk are only staged under a token
    # (budget 0), the last one makes them one job and starts the reaping, so a reap between
    # the calls cannot start a job that holds part of them (lua/delete_for_runs.lua)
    chunks = [
        encoded[start : start + core.limits.run_chunk]
        for start in range(0, len(encoded), core.limits.run_chunk)
    ]
    token = secrets.token_hex(8) if len(chunks) > 1 else ""
    for chunk in chunks[:-1]:
        staged = [
            job_call(core, calls.delete_for_runs, t, budget=0, token=token, run_ids=chunk)[1]
            for t in thread_ids
        ]
        if len(staged) == 1:  # (a pipeline would load the scripts first)
            yield staged[0]
            continue
        for start in range(0, len(staged), core.limits.batch_size):
            yield Batch(staged[start : start + core.limits.batch_size])
    last = chunks[-1]
    # (a thread it empties keeps its graph's ledger while that expires, so it reads as new,
    # not as evicted whole: it stays in the registry of live threads, as those it leaves)
    yield from run_jobs(
        core,
        (job_call(core, calls.delete_for_runs, t, token=token, run_ids=last) for t in thread_ids),
    )


def set_thread_ttl(core: CoreState, thread_id: str, seconds: int | None) -> Op[None]:
    """Give a thread its own expiry (``0`` pins it), or, with ``None``, return it to the
    saver's default."""
    tag = core.keys.tag(str(thread_id))
    mode, value = ("default", core.ttl_seconds) if seconds is None else ("own", seconds)
    keys = core.keys
    call = calls.set_thread_ttl(
        keys.thread(tag),
        keys.runs(tag),
        keys.thread_ttl(tag),
        keys.gc(tag),
        prefix=keys.prefix,
        tag=tag,
        mode=mode,
        seconds=value,
        budget=core.limits.reap_step,
    )
    # the thread's keys may now expire before the deadline noted for it: out of the registry
    # of live threads meanwhile, then noted with its own new expiry (its P:ttl:{T} lives as
    # long, so a thread without checkpoints never reads as lost: missing_root); pinned (no
    # volatile-* policy evicts it) or back to the default: the next put notes it
    yield from deadlines.forget(core, [tag])
    started = time.monotonic()
    yield from run_jobs(core, [(tag, call)])
    if mode == "own" and value > 0:
        yield from deadlines.note_set(core, tag, value, time.monotonic() - started)
    else:
        yield from deadlines.forget(core, [tag])


def copy_thread(core: CoreState, source_thread_id: str, target_thread_id: str) -> Op[None]:

    source, target = str(source_thread_id), str(target_thread_id)
    if source == target:
        return
    keys = core.keys
    source_tag, tag = keys.tag(source), keys.tag(target)
    target_keys = (keys.thread(tag), keys.runs(tag), keys.gc(tag))

    ahead = cluster_lists.Ahead() if core.cluster_lists else None

    # the copy's job is its number and this token: a number comes again once the target's
    # jobs are all gone (a delete discarded this one), the token never
    token = secrets.token_hex(8)

    def target_call(mode: str, job: int, *records: Arg) -> ScriptCall:
        indexes = ahead.hint() if ahead is not None else "1" if core.global_index else "0"
        return calls.import_thread(
            *target_keys,
            prefix=keys.prefix,
            tag=tag,
            ttl=core.ttl_seconds,
            mode=mode,
            job=f"{job}:{token}",
            indexes=indexes,
            records=records,
        )

    def chunk(job: int, records: Sequence[Arg]) -> Op[int]:
        """One chunk into the target; on a cluster, once the lists it needs hold the target."""
        while True:
            reply = yield target_call("chunk", job, *records)
            if ahead is None or not cluster_lists.is_index_reply(reply):
                if ahead is not None:
                    ahead.bounds.clear()  # (recorded by the target: the hint stays short)
                return int(reply)
            yield from cluster_lists.answer(core, tag, reply, ahead)

    def export_call(cursor: Sequence[Arg], check: str | None = None) -> ScriptCall:
        return calls.export_thread(
            keys.thread(source_tag),
            prefix=keys.prefix,
            tag=source_tag,
            cursor=cursor,
            max_checkpoints=core.limits.export_checkpoints,
            max_bytes=core.limits.export_bytes,
            check=check,
        )

    def refuse_unreadable(reply: Sequence[Any]) -> None:
        if len(reply) == 3 and reply[1] == b"u":
            raise ValueError(
                f"copy of {source!r} to {target!r} refused: unreadable record "
                f"{reply[2].decode()} (the target is as it was)"
            )

    job = -1
    for _ in range(5):
        job = int((yield target_call("begin", 0)))
        if job >= 0:
            break
        yield from reap_tag(core, tag)  # an earlier job of the target goes first
    if job < 0:
        raise CopyInterruptedError(f"the copy target {target!r} keeps being reaped")
    cursor: Sequence[Arg] = START_CURSOR
    if job == 0:
        # a target that exists gets every chunk as it comes: an unreadable record of the
        # source must stop the copy before the first (a new target's job is discarded)
        while True:
            reply = yield export_call(cursor, "check")
            refuse_unreadable(reply)
            if reply[0] is None:
                break
            cursor = list(reply[0])
        cursor = START_CURSOR
    copied = False  # (into a target that exists: checkpoints are written chunk by chunk)
    try:
        while True:
            reply = yield export_call(cursor)
            refuse_unreadable(reply)
            if len(reply) > 1:
                if (yield from chunk(job, reply[1:])) < 0:
                    raise CopyInterruptedError(
                        f"copy of {source!r} to {target!r}: the target was written or deleted "
                        "meanwhile, and the copy discarded"
                    )
                copied = True
            if reply[0] is None:
                break
            cursor = list(reply[0])
        published = int((yield target_call("publish", job)))
    except CopyInterruptedError as exc:
        if job == 0 and copied:  # (no job: what the chunks wrote stays)
            raise CopyInterruptedError(
                f"copy of {source!r} to {target!r} stopped midway: the target has a job "
                "pending (a delete, prune or ttl change); the checkpoints copied before stay "
                "in the target, each whole"
            ) from exc
        raise  # (its job is gone already)
    except Exception as exc:
        # A copy to a new target that fails midway (the server full: maxmemory is checked per
        # call) discards its own job now, not when someone reaps the target next (reaping
        # only deletes: a full server allows it). Should that fail too (the server gone), the
        # job is left to the next reaper, as when the client dies. A target that existed
        # keeps the checkpoints copied so far, each whole.
        if job > 0:
            with contextlib.suppress(Exception):  # (the error that stopped the copy says why)
                yield from reap_tag(core, tag, (f"copy:{job}", token))
        elif copied and isinstance(exc, ServerFullError):
            raise ServerFullError(
                f"copy of {source!r} to {target!r} stopped midway: the checkpoints copied "
                f"before stay in the target, each whole ({exc})"
            ) from exc
        raise
    if published < 0:
        raise CopyInterruptedError(
            f"copy of {source!r} to {target!r}: the target was written or deleted meanwhile, "
            "and the copy discarded"
        )
