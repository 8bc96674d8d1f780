"""Changing the store: ``delete``, ``prune``, ``copy`` (through the saver's own operations,
each thread in atomic steps) and ``reindex`` (the global metadata indexes); and the server's
function libraries of this package (``libraries``)."""

from __future__ import annotations

import argparse
from typing import Any

import redis

from ..functions import versions_on_server
from ..keys import KeySchema
from ..scripts import function_library
from ..sync import RedisSaver
from .common import CliError, chunks, dedupe, index_states, open_saver, refused
from .output import emit_json, escape, make_console, ttl_text
from .store import (
    ThreadKeys,
    existing,
    require_thread,
    scan_thread_ids,
    seconds_left,
    thread_exists,
    walk_thread,
)


def _left(saver: RedisSaver, before: list[ThreadKeys]) -> list[ThreadKeys]:
    """The threads as they are now: what their roots lead to, and any key found before that
    still exists (a key an index no longer leads to still counts while it is there)."""
    after = []
    for old in before:
        now = walk_thread(saver, old.thread_id)
        now.keys = dedupe([*now.keys, *existing(saver.client, old.keys)])
        after.append(now)
    return after


def cmd_delete(args: argparse.Namespace) -> int:
    with open_saver(args) as saver:
        require_thread(saver, args.thread)
        before = walk_thread(saver, args.thread)
        saver.delete_thread(args.thread)
        (after,) = _left(saver, [before])
        prefix = saver.prefix
    data = {
        "thread_id": args.thread,
        "keys_before": len(before.keys),
        "keys_after": len(after.keys),
    }
    if args.json:
        return emit_json(data)
    make_console().print(
        escape(
            f"deleted thread {args.thread!r} under prefix {prefix!r}: "
            f"{data['keys_before']} keys before, {data['keys_after']} after"
        )
    )
    return 0


def cmd_prune(args: argparse.Namespace) -> int:
    if args.all and args.threads:
        raise CliError("give thread ids or --all, not both")
    if not args.all and not args.threads:
        raise CliError("give the thread ids to prune, or --all for every thread")
    from .output import progress_bar

    with open_saver(args) as saver:
        if args.all:
            thread_ids = scan_thread_ids(saver)  # the one SCAN pass
        else:
            thread_ids = dedupe(args.threads)
            for thread_id in thread_ids:
                require_thread(saver, thread_id)
        before = [walk_thread(saver, t) for t in thread_ids]
        with progress_bar(not args.json, len(thread_ids), f"prune ({args.strategy})") as progress:
            for batch in chunks(thread_ids, args.batch_size):
                saver.prune(batch, strategy=args.strategy)
                if progress is not None:
                    progress.advance(progress.task_ids[0], len(batch))
        after = _left(saver, before)
        data = {
            "prefix": saver.prefix,
            "strategy": args.strategy,
            "threads": len(thread_ids),
            "checkpoints_before": sum(t.checkpoints for t in before),
            "checkpoints_after": sum(t.checkpoints for t in after),
            "keys_before": sum(len(t.keys) for t in before),
            "keys_after": sum(len(t.keys) for t in after),
        }
    if args.json:
        return emit_json(data)
    make_console().print(
        escape(
            f"pruned {data['threads']} thread(s) under prefix {data['prefix']!r} "
            f"({data['strategy']}): checkpoints {data['checkpoints_before']} -> "
            f"{data['checkpoints_after']}, keys {data['keys_before']} -> {data['keys_after']}"
        )
    )
    return 0


def cmd_copy(args: argparse.Namespace) -> int:
    if args.source == args.target:
        raise CliError("the source and the target are the same thread")
    ttl = None if args.ttl is None else {"default_ttl": args.ttl}
    with open_saver(args, ttl=ttl) as saver:
        require_thread(saver, args.source)
        if thread_exists(saver, args.target):
            raise CliError(
                f"thread {args.target!r} already has checkpoints under prefix "
                f"{saver.prefix!r}: delete it first, or copy to a new thread id"
            )
        saver.copy_thread(args.source, args.target)
        copied = walk_thread(saver, args.target)
        schema = KeySchema(saver.prefix)
        left = seconds_left(int(saver.client.pttl(schema.thread(schema.tag(args.target)))))
        data = {
            "source": args.source,
            "target": args.target,
            "checkpoints": copied.checkpoints,
            "keys": len(copied.keys),
            "ttl": left,
        }
        prefix = saver.prefix
    if args.json:
        return emit_json(data)
    make_console().print(
        escape(
            f"copied thread {args.source!r} to {args.target!r} under prefix {prefix!r}: "
            f"{data['checkpoints']} checkpoints, {data['keys']} keys, ttl {ttl_text(left)}"
        )
    )
    return 0


def cmd_reindex(args: argparse.Namespace) -> int:
    # the saver registers the --index keys ("building" on a store with threads), then
    # reindex_metadata completes every key registered as "building"
    with open_saver(args, index_metadata=args.index or ()) as saver:
        added = saver.reindex_metadata()
        registry = saver.client.hgetall(KeySchema(saver.prefix).metadata_keys())
        prefix = saver.prefix
    indexes = index_states(registry)
    data = {"prefix": prefix, "added": added, "indexes": indexes}
    if args.json:
        return emit_json(data)
    listed = ", ".join(f"{key} {state}" for key, state in indexes.items()) or "none registered"
    make_console().print(
        escape(f"added {added} index entries under prefix {prefix!r}; indexes: {listed}")
    )
    return 0


def cmd_libraries(args: argparse.Namespace) -> int:
    # Each version of the package loads a library of its own (rediskv_<digest of its code>),
    # and none deletes another's. Deleting one that a saver still runs costs that saver a
    # FUNCTION LOAD on its next call (it loads its library again, or runs its scripts).
    name = function_library()[0]
    with open_saver(args) as saver:
        client = saver.client
        if not isinstance(client, redis.Redis):  # the CLI connects to one server
            raise CliError("libraries acts on a single server, not a cluster")
        try:
            listing = client.function_list(library="rediskv_*", withcode=True)
        except redis.exceptions.ResponseError as exc:
            if str(exc).lower().startswith("unknown"):
                raise CliError(
                    "the server has no functions (Redis 7.0 and later, Valkey)"
                ) from None
            raise CliError(refused("FUNCTION LIST", exc)) from exc
        state, others = versions_on_server(listing)
        deleted: list[str] = []
        failed: list[dict[str, str]] = []
        if args.delete_old:
            for old in others:
                try:
                    client.function_delete(old)
                except redis.exceptions.ResponseError as exc:
                    if "not found" not in str(exc).lower():  # (gone meanwhile: fine)
                        failed.append({"library": old, "error": refused("FUNCTION DELETE", exc)})
                        continue
                deleted.append(old)
    kept = [old for old in others if old not in deleted]
    data: dict[str, Any] = {"library": name, "state": state, "others": kept, "deleted": deleted}
    if failed:
        data["failed"] = failed
    exit_code = 2 if failed else 0
    if args.json:
        emit_json(data)
        return exit_code
    lines = [f"{name} (this version): {state}"]
    if state == "other code":
        lines.append(
            f"  savers of this version run scripts until FUNCTION DELETE {name} and a "
            "restart of their processes"
        )
    lines += [f"{old}: deleted" for old in deleted]
    why_not = {f["library"]: f["error"] for f in failed}
    lines += [
        f"{old}: another version's" + (f"; not deleted: {why_not[old]}" if old in why_not else "")
        for old in kept
    ]
    if kept and not args.delete_old:
        lines.append("(--delete-old deletes the libraries of other versions)")
    if failed:
        lines.append(f"{len(failed)} of {len(others)} libraries not deleted (exit code 2)")
    make_console().print(escape("\n".join(lines)))
    return exit_code
