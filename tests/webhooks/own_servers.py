"""A Redis or PostgreSQL server of a test's own, on a free port of 127.0.0.1, to freeze at will.

The servers every test shares (6379, 5432) are never frozen, killed or reconfigured: a test that
does that to its store starts one of these.  Each server runs in a process group of its own (for
PostgreSQL: the postmaster and every backend), so :meth:`OwnServer.freeze` stops all of it with
one SIGSTOP, as a host that stalls would; it gets SIGKILL when the test process dies, and is
stopped when the ``with`` block ends.  PostgreSQL refuses to run as root: under root it runs as
the ``postgres`` user, in a directory of its own.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import attrs
import pytest

_PR_SET_PDEATHSIG = 1
_START_LIMIT = 30.0
_POSTGRES_SETTINGS = (
    "-c",
    "listen_addresses=127.0.0.1",
    "-c",
    "fsync=off",
)  # a guard against a hang, not a speed requirement


@attrs.define
class OwnServer:
    """A server process group; ``url`` reaches it."""

    url: str
    process: subprocess.Popen[bytes]
    frozen: bool = False

    def freeze(self) -> None:
        os.killpg(self.process.pid, signal.SIGSTOP)
        self.frozen = True

    def thaw(self) -> None:
        os.killpg(self.process.pid, signal.SIGCONT)
        self.frozen = False


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _die_with_parent() -> None:
    """In the child before exec: SIGKILL when the test process dies, however it dies."""
    ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


def _program(name: str) -> str:
    found = shutil.which(name)
    if found is None:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"{name} is not installed; CI=true requires it for the stalled-store tests")
        pytest.skip(f"{name} is not installed")
    return found


def _wait_for_port(port: int, process: subprocess.Popen[bytes], what: str) -> None:
    deadline = time.monotonic() + _START_LIMIT
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise AssertionError(f"{what} exited with {process.returncode} before listening")
        with socket.socket() as probe:
            if probe.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)
    raise AssertionError(f"{what} did not listen on port {port}")


@contextlib.contextmanager
def _running(process: subprocess.Popen[bytes], url: str) -> Iterator[OwnServer]:
    server = OwnServer(url, process)
    try:
        yield server
    finally:
        if server.frozen:
            server.thaw()
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()


@contextlib.contextmanager
def own_redis() -> Iterator[OwnServer]:
    """A redis-server on a free port, saving nothing to disk."""
    program = _program("redis-server")
    port = _free_port()
    with tempfile.TemporaryDirectory(prefix="asyncsdk-redis-") as directory:
        process = subprocess.Popen(
            [program, "--bind", "127.0.0.1", "--port", str(port), "--save", "", "--dir", directory],
            stdout=subprocess.DEVNULL,
            start_new_session=True,
            preexec_fn=_die_with_parent,  # the child is single-threaded
        )
        with _running(process, f"redis://127.0.0.1:{port}/0") as server:
            _wait_for_port(port, process, "redis-server")
            yield server


@contextlib.contextmanager
def own_postgres() -> Iterator[OwnServer]:
    """A PostgreSQL cluster made by initdb (trust auth, user ``postgres``, database
    ``postgres``), on a free port, without fsync (nothing here survives the test)."""
    initdb, postgres = _program("initdb"), _program("postgres")
    as_root = os.geteuid() == 0
    user = "postgres" if as_root else None
    directory = tempfile.mkdtemp(prefix="asyncsdk-postgres-")
    try:
        if as_root:
            entry = pwd.getpwnam("postgres")
            os.chown(directory, entry.pw_uid, entry.pw_gid)
        data = str(Path(directory) / "data")
        subprocess.run(
            [initdb, "-D", data, "-A", "trust", "-U", "postgres", "--no-sync", "-E", "UTF8"],
            check=True,
            stdout=subprocess.DEVNULL,
            user=user,
        )
        port = _free_port()
        process = subprocess.Popen(
            [postgres, "-D", data, "-p", str(port), "-k", directory, *_POSTGRES_SETTINGS],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            user=user,
            start_new_session=True,
            preexec_fn=_die_with_parent,  # the child is single-threaded
        )
        with _running(process, f"postgresql://postgres@127.0.0.1:{port}/postgres") as server:
            _wait_for_port(port, process, "postgres")
            yield server
    finally:
        shutil.rmtree(directory, ignore_errors=True)
