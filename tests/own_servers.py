"""A Redis or PostgreSQL server of one test's own, to kill, freeze, restart or reconfigure at will.

The servers every test shares (6379, 5432) are never frozen, killed or reconfigured: a test that
does that to its store starts one of these.  Each binds to a free port of 127.0.0.1, keeps its
files in a directory of its own, runs in a process group of its own (for PostgreSQL: the
postmaster and every backend, so that :meth:`OwnServer.freeze` stops all of it with one SIGSTOP,
as a host that stalls would), gets SIGKILL when the test process dies however it dies
(``PR_SET_PDEATHSIG``, Linux), and is killed when the ``with`` block ends.  Without the server's
program the test skips, and fails under ``CI=true``.  PostgreSQL refuses to run as root: under
root it runs as the ``postgres`` user.
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

import pytest
import redis

_PR_SET_PDEATHSIG = 1
_START_LIMIT = 30.0  # a guard against a hang, not a speed requirement


def program(name: str) -> str:
    """The path of the program ``name``; skips the test without it (fails it under CI=true).

    Looked for on PATH, then among PostgreSQL's programs where Debian installs them
    (``/usr/lib/postgresql/<version>/bin``, the newest first), which are not on PATH.
    """
    versions = sorted(
        Path("/usr/lib/postgresql").glob("*/bin"),
        key=lambda folder: int(folder.parent.name) if folder.parent.name.isdigit() else 0,
        reverse=True,
    )
    search = os.pathsep.join([os.environ.get("PATH", os.defpath), *map(str, versions)])
    found = shutil.which(name, path=search)
    if found is None:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"{name} is not installed; CI=true requires it")
        pytest.skip(f"{name} is not installed")
    return found


def free_port() -> int:
    """A port of 127.0.0.1 that nothing listens on now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _die_with_parent() -> None:
    """In the child before exec: SIGKILL when the test process dies, however it dies."""
    ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


class OwnServer:
    """One server process group on ``port``; :meth:`start` runs it again after :meth:`kill`."""

    def __init__(self, command: list[str], port: int, url: str, user: str | None = None) -> None:
        self.command = command
        self.port = port
        self.url = url
        """What the test's clients connect to."""
        self.user = user
        self.process: subprocess.Popen[bytes] | None = None
        self.frozen = False

    def start(self) -> None:
        self.process = subprocess.Popen(
            self.command,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            user=self.user,
            start_new_session=True,
            preexec_fn=_die_with_parent,  # only sets the death signal; the child is single-threaded
        )
        deadline = time.monotonic() + _START_LIMIT
        while not self.ready():
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"{self.command[0]} did not start:\n{self.log()}")
            time.sleep(0.05)

    def ready(self) -> bool:
        """Whether the server answers (here: listens on its port)."""
        with socket.socket() as probe:
            return probe.connect_ex(("127.0.0.1", self.port)) == 0

    def log(self) -> str:
        return ""

    def freeze(self) -> None:
        """SIGSTOP to the whole group: the server holds its connections and answers nothing."""
        assert self.process is not None
        os.killpg(self.process.pid, signal.SIGSTOP)
        self.frozen = True

    def thaw(self) -> None:
        assert self.process is not None
        os.killpg(self.process.pid, signal.SIGCONT)
        self.frozen = False

    def kill(self) -> None:
        """SIGKILL to the whole group: the server dies at once, writing nothing more (what the
        OS has stays)."""
        if self.process is None or self.process.returncode is not None:
            return
        if self.frozen:
            self.thaw()
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait()


class OwnRedis(OwnServer):
    """``redis-server`` in ``directory``, RDB snapshots off; with ``appendfsync``, the
    append-only file on with that policy (the only thing that persists), else nothing saved."""

    def __init__(
        self, directory: Path, appendfsync: str | None = None, extra: tuple[str, ...] = ()
    ) -> None:
        port = free_port()
        aof = ("--appendonly", "yes", "--appendfsync", appendfsync) if appendfsync else ()
        command = [
            *(program("redis-server"), "--port", str(port), "--bind", "127.0.0.1"),
            *("--dir", str(directory), "--save", ""),
            *aof,
            *("--logfile", str(directory / "redis.log")),
            *extra,  # as on redis-server's command line: "--replicaof", HOST, PORT...
        ]
        super().__init__(command, port, f"redis://127.0.0.1:{port}/0")
        self.directory = directory

    def start(self) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        super().start()

    def ready(self) -> bool:
        """Answers PING, done loading its append-only file."""
        client = redis.Redis(port=self.port, socket_connect_timeout=1)
        try:
            return bool(client.ping())
        except (redis.BusyLoadingError, redis.ConnectionError):
            return False
        finally:
            client.close()

    def log(self) -> str:
        path = self.directory / "redis.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def aof_files(self) -> list[Path]:
        """The append-only files (Redis 7: ``appendonlydir/*.aof``; the last is the one
        written to)."""
        return sorted((self.directory / "appendonlydir").glob("*.incr.aof"))

    def aof_bytes(self) -> bytes:
        return b"".join(path.read_bytes() for path in self.aof_files())

    def cut_aof(self, size: int) -> None:
        """Cut the append-only file being written back to ``size`` bytes, as a crash of the host
        leaves it when the last writes were not fsynced, and let ``redis-check-aof --fix`` drop a
        command cut in two.  The server must be killed first."""
        assert self.process is None or self.process.poll() is not None, "kill the server first"
        *_, aof = self.aof_files()
        with aof.open("r+b") as file:
            file.truncate(size)
        fixed = subprocess.run(
            [program("redis-check-aof"), "--fix", str(aof)],
            input=b"y\n",
            capture_output=True,
            check=False,
        )
        assert fixed.returncode == 0, fixed.stdout + fixed.stderr


@contextlib.contextmanager
def own_redis(
    directory: Path | None = None, appendfsync: str | None = None, extra: tuple[str, ...] = ()
) -> Iterator[OwnRedis]:
    """A started :class:`OwnRedis` (in a temporary directory unless given one), killed at the
    end of the block."""
    with contextlib.ExitStack() as stack:
        if directory is None:
            directory = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="own-redis-")))
        server = OwnRedis(directory, appendfsync, extra)
        stack.callback(server.kill)
        server.start()
        yield server


@contextlib.contextmanager
def own_postgres() -> Iterator[OwnServer]:
    """A started PostgreSQL cluster made by initdb (trust auth, user ``postgres``, database
    ``postgres``), without fsync (nothing here survives the test), killed at the end of the
    block."""
    initdb, postgres = program("initdb"), program("postgres")
    user = "postgres" if os.geteuid() == 0 else None
    directory = tempfile.mkdtemp(prefix="own-postgres-")
    try:
        if user is not None:
            entry = pwd.getpwnam(user)
            os.chown(directory, entry.pw_uid, entry.pw_gid)
        data = str(Path(directory) / "data")
        subprocess.run(
            [initdb, "-D", data, "-A", "trust", "-U", "postgres", "--no-sync", "-E", "UTF8"],
            check=True,
            stdout=subprocess.DEVNULL,
            user=user,
        )
        port = free_port()
        server = OwnServer(
            [
                *(postgres, "-D", data, "-p", str(port), "-k", directory),
                *("-c", "listen_addresses=127.0.0.1", "-c", "fsync=off"),
            ],
            port,
            f"postgresql://postgres@127.0.0.1:{port}/postgres",
            user=user,
        )
        try:
            server.start()
            yield server
        finally:
            server.kill()
    finally:
        shutil.rmtree(directory, ignore_errors=True)
