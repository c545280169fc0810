"""A Redis server of one test's own, which it may kill, restart and cut the files of.

``redis-server`` on a free port of 127.0.0.1, with its own ``--dir``, the append-only file on and
the ``appendfsync`` policy given; RDB snapshots off, so that only the append-only file persists.
The server dies with the process that started it (``PR_SET_PDEATHSIG``, Linux) and is stopped by
:meth:`OwnRedis.stop`.  Without ``redis-server`` the tests using it skip, and fail under
``CI=true``.
"""

from __future__ import annotations

import ctypes
import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest
import redis

_PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:  # runs in the child, before exec
    ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


def redis_server_binary() -> str:
    """The path of ``redis-server``; skips (fails under CI=true) without one."""
    binary = shutil.which("redis-server")
    if binary is None:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail("redis-server is not installed; CI=true requires it")
        pytest.skip("redis-server is not installed")
    return binary


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


class OwnRedis:
    """One ``redis-server`` in ``directory`` with ``appendonly yes`` and ``appendfsync``."""

    def __init__(
        self, directory: Path, appendfsync: str = "everysec", extra: tuple[str, ...] = ()
    ) -> None:
        self.binary = redis_server_binary()
        self.directory = directory
        self.appendfsync = appendfsync
        self.extra = extra
        """More options, as on redis-server's command line (``--replicaof HOST PORT``...)."""
        self.port = free_port()
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        self.process = subprocess.Popen(
            [
                *(self.binary, "--port", str(self.port), "--bind", "127.0.0.1"),
                *("--dir", str(self.directory), "--save", ""),
                *("--appendonly", "yes", "--appendfsync", self.appendfsync),
                *("--logfile", str(self.directory / "redis.log")),
                *self.extra,
            ],
            stdout=subprocess.DEVNULL,
            preexec_fn=_die_with_parent,  # only sets the death signal
        )
        client = redis.Redis(port=self.port, socket_connect_timeout=1)
        deadline = time.monotonic() + 20  # a guard against a hang, not a speed requirement
        try:
            while True:
                try:
                    if client.ping():
                        return
                except redis.BusyLoadingError:
                    pass
                except redis.ConnectionError:
                    if self.process.poll() is not None or time.monotonic() > deadline:
                        log = (self.directory / "redis.log").read_text(errors="replace")
                        raise AssertionError(f"redis-server did not start:\n{log}") from None
                time.sleep(0.05)
        finally:
            client.close()

    def kill(self) -> None:
        """SIGKILL: the server dies at once, writing nothing more (what the OS has stays)."""
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait()

    def stop(self) -> None:
        self.kill()

    def aof_files(self) -> list[Path]:
        """The append-only files (Redis 7: ``appendonlydir/*.aof``; the last is the one
        written to)."""
        return sorted((self.directory / "appendonlydir").glob("*.incr.aof"))

    def aof_bytes(self) -> bytes:
        return b"".join(path.read_bytes() for path in self.aof_files())

    def cut_aof(self, size: int) -> None:
        """Cut the append-only file being written back to ``size`` bytes, as a crash of the host
        leaves it when the last writes were not fsynced, and let ``redis-check-aof --fix`` drop a
        command cut in two.  The server must be stopped."""
        assert self.process is None or self.process.poll() is not None, "stop the server first"
        *_, aof = self.aof_files()
        with aof.open("r+b") as file:
            file.truncate(size)
        checker = shutil.which("redis-check-aof") or "redis-check-aof"
        fixed = subprocess.run(
            [checker, "--fix", str(aof)], input=b"y\n", capture_output=True, check=False
        )
        assert fixed.returncode == 0, fixed.stdout + fixed.stderr
