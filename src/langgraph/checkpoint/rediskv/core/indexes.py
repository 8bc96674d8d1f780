"""The global metadata indexes and the threads-by-value indexes: their registry (P:mk) and
reindex_metadata, which completes the indexes of keys registered on a store that had
checkpoints."""

from __future__ import annotations

import secrets
from collections.abc import Sequence

from ..keys import THREADS_BY_VALUE
from . import calls, cluster_lists, discovery
from .requests import Arg, Op, ScanKeys
from .state import CoreState


def register_metadata_index(core: CoreState) -> Op[None]:
    """Enter the saver's indexed keys, and the threads-by-value indexes
    (THREADS_BY_VALUE), in the registry P:mk, once per saver: "ready" on a store without
    threads (every checkpoint will be indexed), else "building" until
    :func:`reindex_metadata` has indexed the checkpoints written before."""
    if not (core.global_index or core.cluster_lists) or core.registered:
        return
    registry = core.keys.metadata_keys()
    indexes = (*core.indexed, THREADS_BY_VALUE)  # (a cluster: no metadata indexes)
    missing = yield calls.register_metadata_index(registry, mode="?", metadata_keys=indexes)
    if missing:
        # checkpoints, not thread roots: pending writes (which LangGraph may store before
        # the first checkpoint's put) need no index
        stored = yield ScanKeys(core.keys.index_pattern())
        state = "building" if stored else "ready"
        yield calls.register_metadata_index(registry, mode=state, metadata_keys=missing)
    core.registered.append(True)


def reindex_metadata(core: CoreState) -> Op[int]:
    """Add every stored checkpoint to the global metadata indexes of every registered key
    (the saver's own and other savers'), thread by thread in bounded steps, then mark the
    keys that were "building" as "ready"; entries a record lists that its index lost (an
    eviction) are written again. Returns the number of index entries added."""
    if not (core.global_index or core.cluster_lists):
        return 0
    yield from register_metadata_index(core)
    registry = core.keys.metadata_keys()
    # the keys this reindex completes: whatever is building when it starts, claimed
    # under a token of its own (a key registered later, or again after the registry was
    # lost, may have missed a thread already visited: it stays building)
    token = secrets.token_hex(8)
    pending = yield calls.register_metadata_index(registry, mode="claim", metadata_keys=(token,))
    added = 0
    thread_ids = yield from discovery.scan_thread_ids(core)
    for thread_id in thread_ids:
        tag = core.keys.tag(thread_id)
        cursor: Sequence[Arg] = ("", "")
        ahead = cluster_lists.Ahead() if core.cluster_lists else None
        while True:
            reply = yield calls.reindex_thread(
                core.keys.thread(tag),
                prefix=core.keys.prefix,
                tag=tag,
                namespace=cursor[0],
                after_id=cursor[1],
                step=core.limits.reindex_step,
                hint=ahead.hint() if ahead is not None else None,
            )
            if ahead is not None and cluster_lists.is_index_reply(reply):
                yield from cluster_lists.answer(core, tag, reply, ahead)
                continue  # (the same stretch again, with the entries written)
            if ahead is not None:
                ahead.bounds.clear()  # (recorded by the thread: the hint stays short)
            added += int(reply[0])
            if len(reply) == 1:
                break
            cursor = (reply[1], reply[2])
    if core.cluster_lists:
        # entries a failover lost (the replica of a list's node had not received them)
        # while the threads' own nodes kept their bounds: no put writes them again
        added += yield from cluster_lists.enter_missing(
            core, [core.keys.tag(t) for t in thread_ids]
        )
    if pending:
        yield calls.register_metadata_index(registry, mode="built", metadata_keys=(token, *pending))
    return added
