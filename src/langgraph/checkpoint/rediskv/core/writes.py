"""Writes: put (a checkpoint, its new channel values, its metadata's index entries) and
put_writes (a task's pending writes), each one script call, sent again until it settles."""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    WRITES_IDX_MAP,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    get_serializable_checkpoint_metadata,
)

from ..compression import Base
from ..keys import blob_ref, decode_part, encode_part, pack_fields
from ..replies import REAPING
from . import calls, cluster_lists, deadlines, jobs
from .codec import INLINE_MARK
from .indexes import register_metadata_index
from .requests import Arg, Op, ScriptCall
from .rules import config_of, id_score, index_suffix, inlinable, thread_id_of
from .state import CoreState


def put(
    core: CoreState,
    config: RunnableConfig,
    checkpoint: Checkpoint,
    metadata: CheckpointMetadata,
    new_versions: ChannelVersions,
) -> Op[RunnableConfig]:
    thread_id = thread_id_of(config)
    configurable = config["configurable"]
    ns = configurable.get("checkpoint_ns") or ""
    parent_id = configurable.get("checkpoint_id") or ""
    checkpoint_id = checkpoint["id"]
    tag, ns_enc = core.keys.tag(thread_id), encode_part(ns)

    values = checkpoint["channel_values"]
    versions = checkpoint["channel_versions"]
    body: dict[str, Any] = {k: v for k, v in checkpoint.items() if k != "channel_values"}
    inline = {ch: v for ch, v in values.items() if ch in versions and inlinable(ch, v)}
    if inline:
        body["channel_values"] = inline
        stored_checkpoint = INLINE_MARK + core.codec.dumps(body, "the checkpoint")
    else:
        stored_checkpoint = core.codec.dumps(body, "the checkpoint")
    full_metadata = get_serializable_checkpoint_metadata(config, metadata)
    stored_metadata = core.codec.dumps(full_metadata, "the checkpoint metadata")
    ref_of = {
        ch: blob_ref(ch, versions[ch]) for ch in values if ch in versions and ch not in inline
    }
    run_id = full_metadata.get("run_id")

    meta_args: list[Arg] = [len(full_metadata)]
    filter_fields: list[tuple[bytes, bytes]] = []
    canonical_values: list[tuple[str, str]] = []
    for key, value in full_metadata.items():
        name, canonical_value = f"m:{key}", core.codec.canonical(value)
        # the key as the record's field names it (an int, a str Enum: its text), which is
        # what the scripts index it by
        text_key = name[2:]
        meta_args += [name, canonical_value, index_suffix(text_key, canonical_value)]
        filter_fields.append((name.encode(), canonical_value.encode()))
        canonical_values.append((text_key, canonical_value))
    # the record's fields the script does not decide, packed here (see put_checkpoint.lua)
    packed_filters = pack_fields(filter_fields)
    packed_large = pack_fields([(b"md", stored_metadata), (b"ck", stored_checkpoint)])
    written: set[str] = set()  # channels whose value goes out with the call
    # channels whose values go out in full: their base is gone or changed, or they are
    # stored again (a blob written anew is full: records sharing it may not list a base)
    in_full: set[str] = set()
    base_of: dict[str, Base] = {}  # channel -> the base its value went out against
    # on a cluster: the threads-by-value list entries written ahead for it (see cluster_lists)
    ahead = cluster_lists.Ahead() if core.cluster_lists else None

    def call() -> ScriptCall:
        blob_args: list[Arg] = []
        shared: list[Arg] = []  # refs of blobs stored before: the script checks them
        base_of.clear()
        for channel, ref in ref_of.items():
            if channel in written:
                stored, base = core.codec.dumps_channel(
                    (tag, ns_enc, channel), ref, values[channel], channel not in in_full
                )
                blob_args += [ref, stored]
                if base is not None:
                    base_of[channel] = base
            else:
                shared.append(ref)
        # the bases go with the record (after the refs of the values and ",,"): a base
        # lives as long as the values compressed against it, get_tuple reads them too
        bases = {base.ref: base for base in base_of.values()}
        base_args: list[Arg] = []
        for base in bases.values():
            base_args += [base.ref, base.check]
        return calls.put_checkpoint(
            core.keys.thread(tag),
            core.keys.index(tag, ns),
            core.keys.checkpoint(tag, ns, checkpoint_id),
            prefix=core.keys.prefix,
            tag=tag,
            namespace=ns_enc,
            checkpoint_id=checkpoint_id,
            parent_id=parent_id,
            filter_fields=packed_filters,
            large_fields=packed_large,
            refs=",".join(ref_of.values()) + ",," + ",".join(bases),
            run_id=encode_part(str(run_id)) if run_id is not None else "",
            ttl=core.ttl_seconds,
            indexed=ahead.hint() if ahead else indexed_arg(core),
            keep_last=core.keep_last,
            score=cluster_lists.score_arg(id_score(checkpoint_id.encode())),
            # a put without a ttl sweeps its indexes one time in four (it adds no
            # entry that can die by expiry; see put_checkpoint.lua)
            sweep="1" if random.random() < 0.25 else "0",
            # the script replies the new deadline only when this one lags it (see .deadlines)
            noted=core.noted_deadlines.last(tag),
            metadata=meta_args,
            blobs=(len(blob_args) // 2, *blob_args),
            shared=(len(shared), *shared),
            bases=(len(bases), *base_args),
        )

    def resend(missing: list[bytes]) -> None:
        # blobs it shares with its parent are gone (expired during a long superstep, or
        # removed by a concurrent prune): store them again with this checkpoint, in full;
        # a base that is gone or changed: send the values compressed against it in full
        for ref in (r.decode() for r in missing):
            users = [channel for channel, base in base_of.items() if base.ref == ref]
            for channel in users:
                core.bases.drop((tag, ns_enc, channel))
            channels = users or [decode_part(ref.split(":", 1)[0])]
            written.update(channels)
            in_full.update(channels)

    written.update(ch for ch in new_versions if ch in ref_of)
    yield from register_metadata_index(core)
    if ahead is not None:
        score = id_score(checkpoint_id.encode())
        run = str(run_id) if run_id is not None else None
        needs = cluster_lists.needs_of(canonical_values, run, score)
        yield from cluster_lists.before_put(core, tag, needs, ahead)
    what = f"put of checkpoint {checkpoint_id!r}"
    deadline = yield from retry(core, thread_id, what, call, resend, ahead)
    yield from deadlines.note_put(core, tag, deadline)
    return config_of(thread_id, ns, checkpoint_id)


def retry(
    core: CoreState,
    thread_id: str,
    what: str,
    call: Callable[[], ScriptCall],
    resend: Callable[[list[bytes]], None] | None = None,
    ahead: cluster_lists.Ahead | None = None,
) -> Op[Any]:
    """Send a write, again after reaping what an earlier delete, prune or copy of the
    thread left ("REAPING"), with the blobs a put found missing (a list reply), or, on a
    cluster, once the threads-by-value lists it needs hold the thread ("INDEX")."""
    for _ in range(core.limits.put_attempts):
        reply = yield call()
        if reply == REAPING:
            yield from jobs.finish_reaping(core, thread_id)
        elif ahead is not None and cluster_lists.is_index_reply(reply):
            yield from cluster_lists.answer(core, core.keys.tag(thread_id), reply, ahead)
        elif isinstance(reply, list) and resend is not None:
            resend(reply)
        else:
            return reply
    raise RuntimeError(
        f"{what} in thread {thread_id!r} did not settle after {core.limits.put_attempts} attempts "
        "(the thread keeps being deleted or pruned meanwhile)"
    )


def indexed_arg(core: CoreState) -> str:
    """put_checkpoint's ARGV[11]: "-" without a global index, else the indexed keys."""
    if not core.global_index:
        return "-"
    return ",".join(encode_part(k) for k in core.indexed)


def put_writes(
    core: CoreState,
    config: RunnableConfig,
    writes: Sequence[tuple[str, Any]],
    task_id: str,
    task_path: str = "",
) -> Op[None]:
    thread_id = thread_id_of(config)
    configurable = config["configurable"]
    ns = configurable.get("checkpoint_ns") or ""
    checkpoint_id = configurable.get("checkpoint_id")
    if not checkpoint_id:
        raise ValueError('put_writes needs a config with "checkpoint_id"')
    if not writes:
        return None
    tag = core.keys.tag(thread_id)
    task_enc = encode_part(task_id)
    triples: list[Arg] = []
    for idx, (channel, value) in enumerate(writes):
        slot = WRITES_IDX_MAP.get(channel, idx)
        stored = core.codec.dumps(value, f"the write to channel {channel!r}")
        # special channels (errors, interrupts, ...) replace; regular writes: first wins
        mode = "u" if channel in WRITES_IDX_MAP else "f"
        triples += [f"{task_enc}:{slot}", core.codec.write_record(task_path, channel, stored), mode]
    call = calls.put_writes(
        core.keys.thread(tag),
        core.keys.writes_index(tag, ns),
        core.keys.writes(tag, ns, checkpoint_id),
        prefix=core.keys.prefix,
        tag=tag,
        namespace=encode_part(ns),
        checkpoint_id=checkpoint_id,
        ttl=core.ttl_seconds,
        keep_last=core.keep_last,
        triples=triples,
    )
    yield from retry(core, thread_id, "put_writes", lambda: call)
    return None
