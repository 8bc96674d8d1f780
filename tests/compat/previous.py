"""The previous release, built from the repository's own git history: the commit named in
tests/compat/previous_release is exported (git archive), built as a wheel and installed into
.cache/compat/<sha>/ of the repository, once per commit; a saver of it runs in a subprocess
with that directory first on PYTHONPATH (tests/compat/old_saver.py)."""

from __future__ import annotations

import base64
import io
import json
import os
import pickle
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
RELEASE_FILE = Path(__file__).with_name("previous_release")


class HistoryMissing(RuntimeError):
    """The repository's history does not hold the previous release's commit."""


def previous_release() -> tuple[str, str]:
    """(tag, full sha) of the previous release, as tests/compat/previous_release names them."""
    tag, sha = RELEASE_FILE.read_text().split()
    return tag, sha


def _git(*args: str) -> bytes:
    return subprocess.run(["git", "-C", str(ROOT), *args], check=True, capture_output=True).stdout


def installed_release() -> Path:
    """The directory holding the previous release's installed package (built if needed)."""
    tag, sha = previous_release()
    target = ROOT / ".cache" / "compat" / sha
    if (target / "COMPLETE").exists():
        return target
    try:
        _git("cat-file", "-e", f"{sha}^{{commit}}")
    except (subprocess.CalledProcessError, FileNotFoundError):
        raise HistoryMissing(
            f"the compatibility test needs the previous release {tag} (commit {sha}) from the "
            f"repository's git history, which {ROOT} does not have (a shallow clone, or no "
            "git): use a clone with its history (git clone without --depth, or git fetch "
            "--unshallow --tags)"
        ) from None
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent) as work:
        source, wheels, site = Path(work, "src"), Path(work, "wheels"), Path(work, "site")
        with tarfile.open(fileobj=io.BytesIO(_git("archive", "--format=tar", sha))) as tar:
            if hasattr(tarfile, "data_filter"):  # (Python 3.10.12+, 3.11.4+)
                tar.extractall(source, filter="data")
            else:
                tar.extractall(source)
        pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q"]
        subprocess.run(
            [*pip, "wheel", "--no-deps", "--no-build-isolation", "-w", str(wheels), str(source)],
            check=True,
            capture_output=True,
        )
        (wheel,) = wheels.glob("*.whl")
        subprocess.run(
            [*pip, "install", "--no-deps", "--target", str(site), str(wheel)],
            check=True,
            capture_output=True,
        )
        (site / "COMPLETE").write_text(f"{tag} {sha} {wheel.name}\n")
        try:
            site.rename(target)
        except OSError:  # another run installed it meanwhile
            if not (target / "COMPLETE").exists():
                raise
            shutil.rmtree(site)
    return target


class OldSaver:
    """A saver of the previous release in a subprocess; calls go as JSON lines."""

    def __init__(self, url: str, prefix: str, options: dict[str, Any]) -> None:
        site = installed_release()
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), str(ROOT)])}
        self.process = subprocess.Popen(
            [sys.executable, "-m", "tests.compat.old_saver", url, prefix, json.dumps(options)],
            cwd=ROOT,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        self.where = str(self.call("where"))
        if not self.where.startswith(str(site)):
            raise RuntimeError(f"the old saver imported {self.where}, not the release in {site}")

    def call(self, name: str, *args: Any) -> Any:
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write(json.dumps({"call": name, "args": args}) + "\n")
        self.process.stdin.flush()
        line = self.process.stdout.readline()
        if not line:
            raise RuntimeError(f"the old saver exited ({self.process.wait()}) during {name}")
        reply = json.loads(line)
        if "error" in reply:
            raise RuntimeError(f"the previous release's {name}{args!r} failed:\n{reply['error']}")
        return pickle.loads(base64.b64decode(reply["ok"]))

    def close(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        self.process.wait(timeout=30)
