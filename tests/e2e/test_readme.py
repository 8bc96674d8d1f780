"""The README's usage examples, run as written against the server under test.

Each example's code block is taken from README.md, its URL swapped for the server under test
(with the test's own key prefix, so that nothing outside it is touched), and run; what it
prints must be what the README's comments say it prints.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import redis

from ..conftest import keys_of

README = Path(__file__).resolve().parents[2] / "README.md"
EXAMPLE_URL = '"redis://localhost:6379/0"'


def example(heading: str) -> str:
    """The first ```python block after the line ``heading``."""
    text = README.read_text()
    start = text.index(f"\n{heading}\n")
    match = re.compile(r"```python\n(.*?)```", re.S).search(text, start)
    assert match, f"no python block after {heading!r}"
    return match.group(1)


def run_example(code: str, url: str, prefix: str) -> None:
    assert code.count(EXAMPLE_URL) == 1, "the example should name its URL once"
    code = code.replace(EXAMPLE_URL, f"{url!r}, prefix={prefix!r}")
    exec(compile(code, str(README), "exec"), {"__name__": "readme_example"})


def test_the_sync_example_prints_what_the_readme_says(
    server_url: str, prefix: str, client: redis.Redis, capsys: pytest.CaptureFixture[str]
) -> None:
    code = example("### Sync")
    assert (
        "# on a new thread: ['hi', 'you said: hi', 'still there?', 'you said: still there?']"
        in code
    )
    assert "# 6: three checkpoints per invoke" in code
    run_example(code, server_url, prefix)
    assert capsys.readouterr().out.splitlines() == [
        "['hi', 'you said: hi', 'still there?', 'you said: still there?']",
        "6",
    ]
    assert len(keys_of(client, f"{prefix}:cp:{{user-42}}:*")) == 6


def test_the_async_example_prints_what_the_readme_says(
    server_url: str, prefix: str, client: redis.Redis, capsys: pytest.CaptureFixture[str]
) -> None:
    code = example("### Async")
    assert "# ['hi', 'you said: hi']" in code
    run_example(code, server_url, prefix)
    # the state, then the history newest first: step and source of each checkpoint
    assert capsys.readouterr().out.splitlines() == [
        "['hi', 'you said: hi']",
        "1 loop",
        "0 loop",
        "-1 input",
    ]
    assert len(keys_of(client, f"{prefix}:cp:{{user-43}}:*")) == 3


def test_the_quick_start_gives_the_two_set_up_commands_as_they_are() -> None:
    """The demo command and the test command, exactly: `.ci/run` runs the test command, and a
    newcomer copies both."""
    text = README.read_text()
    quick_start = text[text.index("\n## Quick start\n") : text.index("\n## Usage\n")]
    blocks = re.findall(r"```sh\n(.*?)```", quick_start, re.S)
    assert blocks == [
        "python3 -m venv .venv && .venv/bin/pip install -e '.[demo]'"
        " && .venv/bin/python -m langgraph.checkpoint.rediskv demo\n",
        "./scripts/test\n",
    ]
    ci = (README.parent / ".ci" / "run").read_text()
    assert "REDIS_URL=redis://127.0.0.1:6379/0 ./scripts/test -q\n" in ci
