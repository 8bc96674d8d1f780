"""One builder per saver script: its KEYS, then its ARGV, in the order of the script's header
(``lua/<name>.lua``), which describes each argument; the builder only lays them out.

Parameters mirror the header's items: one per ``KEYS[i]`` / ``ARGV[i]``, one sequence per
range (``ARGV[3..6]``, ``KEYS[1..n]``, ``ARGV[5..]``) and per group the header adds on a line
of its own (``then ...``). A group whose count the header numbers (``ARGV[6]  h, the number
of ...``) is one sequence at that position, count first, as the callers build it. An optional
item (a ``N..M`` tail) defaults to None: left out. tests/unit/test_calls.py holds each builder
to its header.
"""

from __future__ import annotations

from collections.abc import Sequence

from .requests import Arg, ScriptCall

# the 4 strings of a walk's cursor (lua/include/walk.lua)
Cursor = Sequence[Arg]
# a group that starts with its count ("f, then f pairs")
Counted = Sequence[Arg]


def _given(*optional: Arg | None) -> tuple[Arg, ...]:
    """An optional tail: its items up to the first one left out (None)."""
    out: list[Arg] = []
    for item in optional:
        if item is None:
            break
        out.append(item)
    return tuple(out)


def check_thread(
    thread: str,
    runs: str,
    *,
    prefix: str,
    tag: str,
    mode: str,
    cursor_or_keys: Sequence[Arg],
    budget: int | None = None,
    lists_complete: str | None = None,
) -> ScriptCall:
    """check_thread.lua: one chunk of a thread's check, or the PTTLs of its keys ("ttl")."""
    args = (prefix, tag, mode, *cursor_or_keys, *_given(budget, lists_complete))
    return ScriptCall("check_thread", (thread, runs), args)


def delete_for_runs(
    thread: str,
    runs: str,
    gc: str,
    *,
    prefix: str,
    tag: str,
    budget: int,
    token: str,
    run_ids: Sequence[Arg],
) -> ScriptCall:
    """delete_for_runs.lua: stage or start the job removing a thread's checkpoints of runs."""
    return ScriptCall("delete_for_runs", (thread, runs, gc), (prefix, tag, budget, token, *run_ids))


def delete_thread(
    thread: str, runs: str, gc: str, *, prefix: str, tag: str, budget: int
) -> ScriptCall:
    """delete_thread.lua: the job removing every key of a thread, and its first step."""
    return ScriptCall("delete_thread", (thread, runs, gc), (prefix, tag, budget))


def enter_thread_list(threads_with: str, *, member: str, score: str) -> ScriptCall:
    """enter_thread_list.lua: a thread's entry in a threads-by-value list (cluster)."""
    return ScriptCall("enter_thread_list", (threads_with,), (member, score))


def export_thread(
    thread: str,
    *,
    prefix: str,
    tag: str,
    cursor: Cursor,
    max_checkpoints: int,
    max_bytes: int,
    check: str | None = None,
) -> ScriptCall:
    """export_thread.lua: a chunk of a thread's records, for copy_thread."""
    args = (prefix, tag, *cursor, max_checkpoints, max_bytes, *_given(check))
    return ScriptCall("export_thread", (thread,), args)


def get_delta_channel_history(
    index: str,
    *,
    prefix: str,
    tag: str,
    namespace: str,
    checkpoint_id: str,
    resume: str,
    budget: int,
    ttl: int,
    channels: Sequence[Arg],
) -> ScriptCall:
    """get_delta_channel_history.lua: a step of the ancestor walk of delta channels."""
    args = (prefix, tag, namespace, checkpoint_id, resume, budget, ttl, *channels)
    return ScriptCall("get_delta_channel_history", (index,), args)


def get_kept_checkpoint(
    index: str, *, prefix: str, tag: str, namespace: str, checkpoint_id: str
) -> ScriptCall:
    """get_kept_checkpoint.lua: one checkpoint by id, also one keep_last hides."""
    return ScriptCall("get_kept_checkpoint", (index,), (prefix, tag, namespace, checkpoint_id))


def get_tuple(
    index: str,
    registry: str | None = None,
    *,
    prefix: str,
    tag: str,
    namespace: str,
    checkpoint_id: str,
    read_ttl: int,
    held: Counted,
) -> ScriptCall:
    """get_tuple.lua: one checkpoint with its values and pending writes. ``registry``: the
    registry of live threads, on a standalone server (see core/deadlines.py)."""
    args = (prefix, tag, namespace, checkpoint_id, read_ttl, *held)
    return ScriptCall("get_tuple", (index, registry) if registry else (index,), args)


def get_write_paths(
    index: str, *, prefix: str, tag: str, namespace: str, checkpoint_ids: Sequence[Arg]
) -> ScriptCall:
    """get_write_paths.lua: the task paths of the pending writes of checkpoints."""
    return ScriptCall("get_write_paths", (index,), (prefix, tag, namespace, *checkpoint_ids))


def import_thread(
    thread: str,
    runs: str,
    gc: str,
    *,
    prefix: str,
    tag: str,
    ttl: int,
    mode: str,
    job: str,
    indexes: str,
    records: Sequence[Arg],
) -> ScriptCall:
    """import_thread.lua: begin, fill (a chunk of records) or publish a copy's target."""
    args = (prefix, tag, ttl, mode, job, indexes, *records)
    return ScriptCall("import_thread", (thread, runs, gc), args)


def list_checkpoints(
    thread: str,
    registry: str | None = None,
    *,
    prefix: str,
    tag: str,
    mode: str,
    namespace: str,
    only_id: str,
    before: Arg,
    page: int,
    scan_budget: int,
    filters: Counted,
    namespaces: Sequence[Arg],
) -> ScriptCall:
    """list_checkpoints.lua: one page of a thread's checkpoints, filtered on the server.
    ``registry``: the registry of live threads, with modes "0u" and "1u" on a standalone
    server (see core/deadlines.py)."""
    args = (prefix, tag, mode, namespace, only_id, before, page, scan_budget, *filters, *namespaces)
    return ScriptCall("list_checkpoints", (thread, registry) if registry else (thread,), args)


def list_indexed(
    metadata_index: str,
    *,
    prefix: str,
    before: Arg,
    page: int,
    scan_budget: int,
    metadata_key: str,
    filters: Counted,
) -> ScriptCall:
    """list_indexed.lua: one page of a global metadata index's checkpoints."""
    args = (prefix, before, page, scan_budget, metadata_key, *filters)
    return ScriptCall("list_indexed", (metadata_index,), args)


def list_thread_candidates(
    threads_by_value: Sequence[str],
    *,
    prefix: str,
    max_score: Arg,
    chunk: int,
    driver: int,
    cluster: str,
) -> ScriptCall:
    """list_thread_candidates.lua: a chunk of the threads the threads-by-value indexes list."""
    args = (prefix, max_score, chunk, driver, cluster)
    return ScriptCall("list_thread_candidates", threads_by_value, args)


def prune(thread: str, runs: str, gc: str, *, prefix: str, tag: str, budget: int) -> ScriptCall:
    """prune.lua: the job keeping only the latest checkpoint of each namespace."""
    return ScriptCall("prune", (thread, runs, gc), (prefix, tag, budget))


def put_checkpoint(
    thread: str,
    index: str,
    record: str,
    *,
    prefix: str,
    tag: str,
    namespace: str,
    checkpoint_id: str,
    parent_id: str,
    filter_fields: Arg,
    large_fields: Arg,
    refs: str,
    run_id: str,
    ttl: int,
    indexed: str,
    keep_last: int,
    score: str,
    sweep: str,
    noted: int,
    metadata: Counted,
    blobs: Counted,
    shared: Counted,
    bases: Counted,
) -> ScriptCall:
    """put_checkpoint.lua: store one checkpoint, its new values and its index entries."""
    args = (
        prefix,
        tag,
        namespace,
        checkpoint_id,
        parent_id,
        filter_fields,
        large_fields,
        refs,
        run_id,
        ttl,
        indexed,
        keep_last,
        score,
        sweep,
        noted,
        *metadata,
        *blobs,
        *shared,
        *bases,
    )
    return ScriptCall("put_checkpoint", (thread, index, record), args)


def put_writes(
    thread: str,
    writes_index: str,
    writes_hash: str,
    *,
    prefix: str,
    tag: str,
    namespace: str,
    checkpoint_id: str,
    ttl: int,
    keep_last: int,
    triples: Sequence[Arg],
) -> ScriptCall:
    """put_writes.lua: store one task's pending writes against one checkpoint."""
    args = (prefix, tag, namespace, checkpoint_id, ttl, keep_last, *triples)
    return ScriptCall("put_writes", (thread, writes_index, writes_hash), args)


def reap_thread(
    gc: str, *, prefix: str, tag: str, budget: int, job: str | None = None, token: str | None = None
) -> ScriptCall:
    """reap_thread.lua: one bounded step of a thread's pending jobs (or of one job alone)."""
    return ScriptCall("reap_thread", (gc,), (prefix, tag, budget, *_given(job, token)))


def register_metadata_index(
    registry: str, *, mode: str, metadata_keys: Sequence[Arg]
) -> ScriptCall:
    """register_metadata_index.lua: ask, claim, read or set the registry of indexed keys."""
    return ScriptCall("register_metadata_index", (registry,), (mode, *metadata_keys))


def reindex_thread(
    thread: str,
    *,
    prefix: str,
    tag: str,
    namespace: Arg,
    after_id: Arg,
    step: int,
    hint: str | None = None,
) -> ScriptCall:
    """reindex_thread.lua: a stretch of a thread's checkpoints into the global indexes."""
    args = (prefix, tag, namespace, after_id, step, *_given(hint))
    return ScriptCall("reindex_thread", (thread,), args)


def run_threads(
    run_index: str, unindexed_runs: str, *, prefix: str, after: Arg, count: int
) -> ScriptCall:
    """run_threads.lua: a chunk of the threads that may hold checkpoints of a run."""
    return ScriptCall("run_threads", (run_index, unindexed_runs), (prefix, after, count))


def set_thread_ttl(
    thread: str,
    runs: str,
    thread_ttl: str,
    gc: str,
    *,
    prefix: str,
    tag: str,
    mode: str,
    seconds: int,
    budget: int,
) -> ScriptCall:
    """set_thread_ttl.lua: the job giving a thread its own expiry, or the default back."""
    args = (prefix, tag, mode, seconds, budget)
    return ScriptCall("set_thread_ttl", (thread, runs, thread_ttl, gc), args)


def store_format(format_key: str) -> ScriptCall:
    """store_format.lua: the stored format of the prefix."""
    return ScriptCall("store_format", (format_key,), ())


def sweep_thread_list(threads_with: str, *, mode: str, operands: Sequence[Arg]) -> ScriptCall:
    """sweep_thread_list.lua: sample a threads-by-value list, remove members, or read a score."""
    return ScriptCall("sweep_thread_list", (threads_with,), (mode, *operands))


def thread_deadlines(live_threads: str, *, mode: str, operands: Sequence[Arg]) -> ScriptCall:
    """thread_deadlines.lua: note threads' deadlines, forget threads, or ask whether one is due."""
    return ScriptCall("thread_deadlines", (live_threads,), (mode, *operands))


def thread_list_registry(registry: str, *, mode: str, operands: Sequence[Arg]) -> ScriptCall:
    """thread_list_registry.lua: enter lists a write-ahead wrote into, or record a sweep."""
    return ScriptCall("thread_list_registry", (registry,), (mode, *operands))


def thread_lists(thread_bounds: str, *, list_suffix: str | None = None) -> ScriptCall:
    """thread_lists.lua: what a thread's entries in the threads-by-value lists hold."""
    return ScriptCall("thread_lists", (thread_bounds,), _given(list_suffix))


def thread_states(*, list_suffix: str, thread_bounds: Sequence[Arg]) -> ScriptCall:
    """thread_states.lua: thread_lists.lua's reply to a list for many threads of one node."""
    return ScriptCall("thread_states", (), (list_suffix, *thread_bounds))
