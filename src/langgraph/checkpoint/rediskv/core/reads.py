"""Reads of one thread: get_tuple, and list() of a thread (list(None) goes to .listing)."""

from __future__ import annotations

import logging
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import CheckpointTuple, get_checkpoint_id

from ..errors import EVICTION_FIX, CheckpointLostError
from ..keys import encode_part, metadata_index_suffix
from ..replies import NAMESPACES
from . import calls, cluster_lists, deadlines, listing, paging
from .merge import StreamMerge
from .requests import Arg, Op, ScriptCall, Stream
from .rules import UNSELECTIVE, indexable, thread_id_of, thread_indexed
from .state import CoreState

# the eviction warnings' logger (README, Eviction), where users find them whichever module
# logs them
eviction_logger = logging.getLogger("langgraph.checkpoint.rediskv.eviction")

# what a latest read falls back past with on_lost_checkpoint="fall_back": a checkpoint that
# lost a value or its whole record (evicted; lua/include/ledger.lua tells it from expired)
FALLS_BACK = ("value", "checkpoint record")


def get_tuple(core: CoreState, config: RunnableConfig) -> Op[CheckpointTuple | None]:
    thread_id = thread_id_of(config)
    ns = config["configurable"].get("checkpoint_ns") or ""
    tag = core.keys.tag(thread_id)
    ns_enc = encode_part(ns)
    # the bases this saver holds of the namespace's channels: the script sends back none
    # of those still stored with the same mark (a chat's base is its history)
    held = {b.ref.encode(): b for b in core.bases.of_namespace(tag, ns_enc) if b.mark}
    held_args: list[Arg] = [len(held)]
    for ref, base in held.items():
        held_args += [ref, base.mark]
    call = calls.get_tuple(
        core.keys.index(tag, ns),
        prefix=core.keys.prefix,
        tag=tag,
        namespace=ns_enc,
        checkpoint_id=get_checkpoint_id(config) or "",
        read_ttl=core.read_ttl_seconds,
        held=held_args,
        registry=deadlines.registry_for_reads(core),
    )
    try:
        record = yield call
        if record == 0:  # no key of the thread is left: new, expired, or evicted whole
            record = yield from deadlines.confirm_untraced(core, thread_id, tag, lambda: call)
    except CheckpointLostError as lost:
        # (only where the read already failed: the hot path is unchanged)
        if core.on_lost_checkpoint != "fall_back" or lost.what not in FALLS_BACK:
            raise
        if get_checkpoint_id(config):
            raise  # a checkpoint asked for by id is that one or none
        return (yield from newest_complete(core, thread_id, ns, lost))
    return core.codec.decode_record(thread_id, record, warm=True, held=held) if record else None


def newest_complete(
    core: CoreState, thread_id: str, ns: str, lost: CheckpointLostError
) -> Op[CheckpointTuple | None]:
    """on_lost_checkpoint="fall_back": the newest checkpoint of the namespace that is still
    complete, read by its id (ids newest first, without their values), and one warning;
    ``lost`` again when none is."""
    lost_id: str | None = None
    before: Arg = ""
    while True:
        page = -core.limits.fall_back_page
        reply = yield paging.list_call(core, thread_id, ns, "", before, page, (0,))
        for entry in reply[1:]:
            checkpoint_id = entry[1].decode()
            config = {
                "configurable": {
                    "thread_id": thread_id,
                    "checkpoint_ns": ns,
                    "checkpoint_id": checkpoint_id,
                }
            }
            try:
                found = yield from get_tuple(core, config)  # type: ignore[arg-type]
            except CheckpointLostError as again:
                if again.what not in FALLS_BACK:
                    raise
                lost_id = lost_id or checkpoint_id
                continue
            if found is not None:
                if lost_id is not None:  # (else a newer complete one came meanwhile)
                    warn_of_fall_back(thread_id, ns, lost_id, lost.key, checkpoint_id, lost.what)
                return found
        if reply[0] is None:
            raise lost
        before = reply[0]


def warn_of_fall_back(
    thread_id: str, ns: str, lost_id: str, key: str, returned_id: str, what: str = "value"
) -> None:
    """The warning of on_lost_checkpoint="fall_back": what was lost, and what was returned
    instead of it."""
    eviction_logger.warning(
        "thread %r lost %s (%s) of its latest checkpoint %s in namespace %r, most likely "
        "to the server's eviction; on_lost_checkpoint='fall_back' returned the newest "
        "complete checkpoint, %s, and the turns after it are lost; to prevent it %s",
        thread_id,
        "a value" if what == "value" else "the record",
        key,
        lost_id,
        ns,
        returned_id,
        EVICTION_FIX,
    )


def list_checkpoints(
    core: CoreState,
    config: RunnableConfig | None,
    *,
    filter: dict[str, Any] | None = None,
    before: RunnableConfig | None = None,
    limit: int | None = None,
) -> Stream:
    if limit is not None and limit <= 0:
        return
    if filter is not None and not isinstance(filter, dict):
        raise TypeError(f"filter must be a dict of metadata keys to values, not {filter!r}")
    filter_args: list[Arg] = [len(filter or {})]
    index: tuple[str, str] | None = None  # (metadata key, index key) to start from
    by_value: list[str] = []  # threads-by-value indexes of the filter's values
    for key, value in sorted((filter or {}).items(), key=lambda kv: kv[0] in UNSELECTIVE):
        if not isinstance(key, str):
            raise TypeError(f"filter keys must be strings (metadata keys are), not {key!r}")
        canonical = core.codec.canonical(value)
        filter_args += [f"m:{key}", canonical]
        if index is None and key in core.indexed and indexable(canonical):
            index = (key, core.keys.metadata_index(metadata_index_suffix(key, canonical)))
        if thread_indexed(key, canonical):
            by_value.append(core.keys.threads_with(metadata_index_suffix(key, canonical)))
        if core.cluster_lists and key == "run_id" and isinstance(value, str):
            by_value.insert(0, core.keys.threads_with(cluster_lists.run_suffix(value)))  # (a few)
    before_id = (get_checkpoint_id(before) or "") if before else ""
    if config is None and index is not None:
        yield from listing.list_indexed(core, *index, filter_args, before_id, limit)
        return
    if config is None and by_value and (core.global_index or core.cluster_lists):
        yield from listing.list_thread_candidates(core, by_value, filter_args, before_id, limit)
        return
    if config is None:
        yield from listing.list_all_threads(core, filter_args, before_id, limit)
        return
    thread_id = thread_id_of(config)
    ns = config["configurable"].get("checkpoint_ns")
    only_id = get_checkpoint_id(config) or ""

    def call(before: Arg, page: int, untraced: bool = False) -> ScriptCall:
        return paging.list_call(core, thread_id, ns, only_id, before, page, filter_args, untraced)

    def first_call() -> ScriptCall:
        return call(before_id, paging.page_size(core.limits, limit), True)

    first = yield first_call()
    if first == 0:  # no key of the thread is left: new, expired, or evicted whole
        tag = core.keys.tag(thread_id)
        first = yield from deadlines.confirm_untraced(core, thread_id, tag, first_call)
        if first is None:
            return
    if first and first[0] == NAMESPACES:  # too many to merge in one call
        streams = paging.namespace_streams(core.limits, thread_id, first[1:])
        yield from StreamMerge(core, streams, filter_args, before_id, limit).run()
        return
    yield from paging.pages(
        core,
        call,
        lambda reply: (core.codec.decode_record(thread_id, record) for record in reply[1:]),
        before_id,
        limit,
        first,
    )
