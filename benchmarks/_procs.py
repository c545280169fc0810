"""The parent's side of the helper processes: start, talk to, and always stop them.

Every child is started through :class:`Child` and recorded in one registry; :func:`stop_all` (run
by ``__main__`` in a ``finally`` and at exit) ends whichever are still alive, each by its own pid.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import queue
import resource
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import IO, Any

from benchmarks._child import MESSAGE, READY, RESULT

ROOT = Path(__file__).resolve().parent.parent
CLIENT_CPU = 0
SERVER_CPU = 1

_alive: set[Child] = set()


class ChildError(RuntimeError):
    """A helper process failed, or did not answer in time."""


def can_pin() -> bool:
    """True when there are two cores to split the client and the server across."""
    if not hasattr(os, "sched_getaffinity"):
        return False
    cores = os.sched_getaffinity(0)
    return CLIENT_CPU in cores and SERVER_CPU in cores


def _core(cpu: int | None) -> int | None:
    return cpu if cpu is not None and can_pin() else None


def _pump(stream: IO[str], lines: queue.Queue[str | None]) -> None:
    for line in stream:
        lines.put(line.rstrip("\n"))
    lines.put(None)


class Child:
    """One helper process running ``benchmarks.<target>`` (see ``_child.py``)."""

    def __init__(
        self,
        target: str,
        kwargs: dict[str, Any] | None = None,
        *,
        cpu: int | None = None,
        argv: Sequence[str] | None = None,
        packages: Path | None = None,
        wrapper: Sequence[str] = (),
    ) -> None:
        """``packages``: a folder whose ``asyncsdk`` and ``webhooks`` the child imports instead
        of this tree's (``benchmarks.sidebyside``); the benchmark code is this tree's.
        ``wrapper``: a command the child's Python runs under (``benchmarks.instructions``:
        valgrind)."""
        self.target = target
        self._log = tempfile.NamedTemporaryFile(  # noqa: SIM115 - closed in stop()
            mode="w+", prefix="bench-child-", suffix=".log"
        )
        core = _core(cpu)
        if argv is None:
            command = [*wrapper, sys.executable, "-m", "benchmarks._child"]
            if core is not None:
                command += ["--cpu", str(core)]
            command += [target, json.dumps(kwargs or {})]
            preexec = None
        else:
            command = list(argv)
            preexec = (lambda: os.sched_setaffinity(0, {core})) if core is not None else None
        env = dict(os.environ, PYTHONPATH=str(ROOT), PYTHONUNBUFFERED="1")
        if packages is not None:
            env["PYTHONPATH"] = os.pathsep.join([str(packages), str(ROOT)])
            # ``-m`` would put the working directory (this tree) ahead of PYTHONPATH.
            env["PYTHONSAFEPATH"] = "1"
        self.proc = subprocess.Popen(
            command,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._log,
            text=True,
            cwd=ROOT,
            env=env,
            preexec_fn=preexec,  # only set for wrk; this parent starts no threads before it
        )
        self._lines: queue.Queue[str | None] = queue.Queue()
        assert self.proc.stdout is not None
        self._reader = threading.Thread(
            target=_pump, args=(self.proc.stdout, self._lines), daemon=True
        )
        self._reader.start()
        _alive.add(self)

    @property
    def pid(self) -> int:
        return self.proc.pid

    def _stderr_tail(self) -> str:
        with contextlib.suppress(OSError, ValueError):
            self._log.flush()
            self._log.seek(0)
            return self._log.read()[-3000:]
        return ""

    def _next(self, prefix: str, timeout: float) -> Any:
        deadline = time.monotonic() + timeout
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise ChildError(
                    f"{self.target}: no {prefix.strip()} line within {timeout} s\n"
                    + self._stderr_tail()
                )
            try:
                line = self._lines.get(timeout=remaining)
            except queue.Empty:
                continue
            if line is None:
                self.proc.wait(timeout=5)
                raise ChildError(
                    f"{self.target} exited with {self.proc.returncode} before its "
                    f"{prefix.strip()} line\n" + self._stderr_tail()
                )
            if line.startswith(prefix):
                return json.loads(line[len(prefix) :])

    def ready(self, timeout: float = 30.0) -> Any:
        return self._next(READY, timeout)

    def recv(self, timeout: float = 30.0) -> Any:
        return self._next(MESSAGE, timeout)

    def lines(self, timeout: float = 30.0) -> str:
        """The next raw output line (for programs other than ``_child``)."""
        try:
            line = self._lines.get(timeout=timeout)
        except queue.Empty as exc:
            raise ChildError(f"{self.target}: silent for {timeout} s") from exc
        if line is None:
            raise ChildError(f"{self.target}: output ended\n" + self._stderr_tail())
        return line

    def output(self, timeout: float) -> str:
        """Everything the program prints until it exits (for programs other than ``_child``)."""
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired as exc:
            self.stop()
            raise ChildError(f"{self.target}: still running after {timeout} s") from exc
        self._reader.join(timeout=5)
        chunks: list[str] = []
        while True:
            try:
                line = self._lines.get_nowait()
            except queue.Empty:
                break
            if line is not None:
                chunks.append(line)
        if self.proc.returncode != 0:
            raise ChildError(
                f"{self.target} exited with {self.proc.returncode}\n"
                + "\n".join(chunks)[-2000:]
                + self._stderr_tail()
            )
        return "\n".join(chunks)

    def send(self, payload: Any) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(payload) + "\n")
        self.proc.stdin.flush()

    def result(self, timeout: float) -> dict[str, Any]:
        value: dict[str, Any] = self._next(RESULT, timeout)
        self.proc.wait(timeout=30)
        return value

    def stop(self, grace: float = 10.0) -> None:
        """Close stdin (the child's stop signal), then SIGTERM, then SIGKILL; by this pid only."""
        if self.proc.poll() is None:
            with contextlib.suppress(OSError, ValueError):
                if self.proc.stdin is not None:
                    self.proc.stdin.close()
            try:
                self.proc.wait(timeout=grace)
            except subprocess.TimeoutExpired:
                self.proc.terminate()
                try:
                    self.proc.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    self.proc.kill()
                    self.proc.wait(timeout=5)
        with contextlib.suppress(OSError, ValueError):
            if self.proc.stdin is not None:
                self.proc.stdin.close()
        self._reader.join(timeout=5)
        with contextlib.suppress(OSError, ValueError):
            if self.proc.stdout is not None:
                self.proc.stdout.close()
        self._log.close()
        _alive.discard(self)


@contextlib.contextmanager
def serving(
    target: str, kwargs: dict[str, Any] | None = None, *, cpu: int | None = SERVER_CPU
) -> Iterator[dict[str, Any]]:
    """A server child for the duration of the block; yields what it sent with ``ready``."""
    child = Child(target, kwargs, cpu=cpu)
    try:
        yield child.ready()
    finally:
        child.stop()


def run_job(
    target: str,
    kwargs: dict[str, Any],
    *,
    cpu: int | None = CLIENT_CPU,
    timeout: float = 300.0,
    packages: Path | None = None,
) -> dict[str, Any]:
    """Run one job child to its end and return its result."""
    child = Child(target, kwargs, cpu=cpu, packages=packages)
    try:
        return child.result(timeout)
    finally:
        child.stop()


def stop_all() -> None:
    for child in list(_alive):
        child.stop(grace=2.0)


atexit.register(stop_all)


def reaped_cpu() -> float:
    """CPU seconds (user + system) of every child this process has started and reaped so far.

    The difference over a call that starts and reaps one child (``Child.output``) is that
    child's CPU time, for programs such as wrk that cannot report their own.
    """
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def which(program: str) -> str | None:
    return shutil.which(program)
