"""``rediskv migrate``: copy threads from another checkpointer into the prefix, and verify
them (:mod:`..migrate` does the work)."""

from __future__ import annotations

import argparse
from typing import Any

from ..migrate import MigrationReport, ThreadReport, migrate, open_source
from ..settings import redact_url
from .common import CliError, dedupe, open_saver
from .output import emit_json, escape, make_console, progress_bar

EXIT_PROBLEMS = 2  # a conflict, a failure, an incomplete copy or differences found


def _thread_data(entry: ThreadReport) -> dict[str, Any]:
    return {
        "thread_id": entry.thread_id,
        "status": entry.status,
        "namespaces": len(entry.namespaces),
        "checkpoints": entry.checkpoints,
        "carried": entry.carried,
        "writes": entry.writes,
        "verified": entry.verified,
        "problems": entry.problems,
    }


def _data(report: MigrationReport, source: str, prefix: str) -> dict[str, Any]:
    return {
        "source": source,
        "prefix": prefix,
        "dry_run": report.dry_run,
        "ok": report.ok,
        "threads": len(report.threads),
        "copied": report.count("copied"),
        "present": report.count("present"),
        "to_copy": report.count("to copy"),
        "conflicts": report.count("conflict"),
        "failed": report.count("failed"),
        "incomplete": report.count("incomplete"),
        "verified": report.verified,
        "checkpoints": report.checkpoints,
        "writes": report.writes,
        "seconds": round(report.seconds, 3),
        "details": [_thread_data(t) for t in report.threads],
    }


def cmd_migrate(args: argparse.Namespace) -> int:
    source_url = redact_url(args.source)
    try:
        opened = open_source(args.source)
        source = opened.__enter__()
    except ImportError as exc:
        raise CliError(
            f"the source {source_url!r} needs a package that is not installed: {exc}"
        ) from None
    try:
        with open_saver(args) as target:
            thread_ids = dedupe(args.threads) if args.threads else source.thread_ids()
            what = "dry run" if args.dry_run else "migrate"
            with progress_bar(not args.json, len(thread_ids), what) as progress:

                def advance(_: ThreadReport) -> None:
                    if progress is not None:
                        progress.advance(progress.task_ids[0])

                report = migrate(
                    source,
                    target,
                    threads=thread_ids,
                    dry_run=args.dry_run,
                    verify=not args.no_verify,
                    recopy=args.recopy,
                    on_thread=advance,
                )
            prefix = target.prefix
    finally:
        opened.__exit__(None, None, None)
    data = _data(report, source_url, prefix)
    code = 0 if report.ok else EXIT_PROBLEMS
    if args.json:
        emit_json(data)
        return code
    console = make_console()
    for entry in report.threads:
        if entry.status in ("copied", "present", "to copy") and not entry.problems:
            continue
        console.print(escape(f"{entry.thread_id}: {entry.status}"), soft_wrap=True)
        for problem in entry.problems[:5]:
            console.print(escape(f"  {problem}"), soft_wrap=True)
        if len(entry.problems) > 5:
            console.print(escape(f"  ... {len(entry.problems) - 5} more"))
    if report.dry_run:
        summary = (
            f"dry run from {source_url} to prefix {prefix!r}: {data['threads']} thread(s), "
            f"{data['to_copy']} to copy, {data['present']} present, "
            f"{data['conflicts']} conflict(s), {data['failed']} failed; "
            f"{data['checkpoints']} checkpoints, {data['writes']} pending writes; nothing written"
        )
    else:
        verified = "not verified" if args.no_verify else f"{data['verified']} verified"
        summary = (
            f"migrated from {source_url} to prefix {prefix!r}: {data['threads']} thread(s), "
            f"{data['copied']} copied, {data['present']} present, "
            f"{data['conflicts']} conflict(s), {data['failed']} failed, "
            f"{data['incomplete']} incomplete, {verified}; "
            f"{data['checkpoints']} checkpoints, {data['writes']} pending writes "
            f"in {report.seconds:.1f} s"
        )
    console.print(escape(summary), soft_wrap=True)
    return code
