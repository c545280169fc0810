"""The progress bar of ``asyncsdk demo``: redrawn in place on a terminal, silent anywhere else
(on a pipe that is checked in test_demo.py)."""

from __future__ import annotations

import contextlib
import io
import os
import pty
import subprocess
import sys
from pathlib import Path

import pytest

from asyncsdk.cli import main

from .conftest import subprocess_env

DEMO = ["demo", "--out", "res", "--delay", "0.5", "--fail", "tool-day-to-dusk"]


def _read_all(fd: int) -> str:
    chunks = []
    while True:
        try:
            chunk = os.read(fd, 4096)
        except OSError:  # the terminal's other end closed
            break
        if not chunk:
            break
        chunks.append(chunk)
    return b"".join(chunks).decode()


def test_the_bar_redraws_one_line_on_a_terminal_and_notes_failures_above_it(tmp_path: Path) -> None:
    controller, terminal = pty.openpty()
    try:
        child = subprocess.Popen(
            [sys.executable, "-m", "asyncsdk", *DEMO],
            cwd=tmp_path,
            env=subprocess_env(),
            stdout=subprocess.PIPE,
            stderr=terminal,
            text=True,
        )
        os.close(terminal)
        drawn = _read_all(controller)
        out, _ = child.communicate(timeout=60)
    finally:
        os.close(controller)
    assert child.returncode == 1
    assert "4 of 5 done" in out
    assert "\r" in drawn  # drawn in place
    assert "processing [" in drawn
    final = drawn.replace("\r\n", "\n").rstrip("\n").rsplit("\r", 1)[-1]
    assert final.startswith("processing [" + "#" * 28 + "] 5/5")
    # A failure is noted on a line of its own above the bar, which goes on below it.
    assert "\ntool-day-to-dusk on exterior.jpg: failed" in drawn.replace("\r\n", "\n").replace(
        "\r", "\n"
    )
    assert "Traceback" not in drawn


def test_the_demo_runs_without_a_stderr_and_draws_no_bar(tmp_path: Path) -> None:
    # Under pythonw, or in a daemon started with its descriptor 2 closed, sys.stderr is None.
    command = [sys.executable, "-m", "asyncsdk", "demo", "--out", "res", "--delay", "0.2"]
    done = subprocess.run(
        ["/bin/sh", "-c", 'exec "$@" 2>&-', "sh", *command],
        cwd=tmp_path,
        env=subprocess_env(),
        stdout=subprocess.PIPE,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0
    assert "5 of 5 done" in done.stdout


class WriteOnly:
    """A stand-in stderr that offers only ``write`` and ``flush``, as a log shim might."""

    def __init__(self) -> None:
        self.written: list[str] = []

    def write(self, text: str) -> int:
        self.written.append(text)
        return len(text)

    def flush(self) -> None:
        pass


def test_the_demo_draws_no_bar_on_a_stderr_that_only_writes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    stand_in = WriteOnly()
    with contextlib.redirect_stderr(stand_in):  # type: ignore[type-var]
        code = main(["demo", "--out", str(tmp_path / "res"), "--delay", "0.2"])
    assert code == 0
    assert "5 of 5 done" in capsys.readouterr().out
    assert stand_in.written == []  # no bar, and no traceback either


def test_the_demo_draws_no_bar_on_a_closed_stderr(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    closed = io.StringIO()
    closed.close()  # isatty() raises ValueError now
    with contextlib.redirect_stderr(closed):
        code = main(["demo", "--out", str(tmp_path / "res"), "--delay", "0.2"])
    assert code == 0
    assert "5 of 5 done" in capsys.readouterr().out
