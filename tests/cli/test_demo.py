"""``asyncsdk demo``: the main job end to end against the embedded sandbox."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest
from PIL import Image

from asyncsdk.cli import main

from .conftest import run_module, subprocess_env

EXPECTED = {
    "bedroom-empty--virtual-staging.jpg",
    "living-room-empty--virtual-staging.jpg",
    "kitchen--image-enhancement.jpg",
    "kitchen--item-removal-mask.jpg",
    "exterior--day-to-dusk.jpg",
}


def _check_results(out: Path) -> None:
    assert {p.name for p in out.iterdir()} == EXPECTED  # no partial downloads left behind
    for path in out.iterdir():
        with Image.open(path) as image:
            image.verify()
        with Image.open(path) as image:
            assert image.size == (640, 427)


def test_demo_in_process(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "res"
    assert main(["demo", "--out", str(out), "--delay", "0.2"]) == 0
    _check_results(out)
    stdout = capsys.readouterr().out
    lines = stdout.splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("tool "))
    rows = lines[header + 2 : header + 7]
    assert [row.split()[2] for row in rows] == ["done"] * 5
    assert "5 of 5 done" in stdout


def test_demo_as_a_process(tmp_path: Path) -> None:
    done = run_module(["demo", "--out", "tmp", "--delay", "0.3"], cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    _check_results(tmp_path / "tmp")
    assert "kitchen--item-removal-mask.jpg" in done.stdout
    assert "5 of 5 done" in done.stdout
    # stderr is not a terminal: no progress bar, no traceback, nothing at all.
    assert done.stderr == ""


def test_a_failed_process_exits_1(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "res"
    code = main(["demo", "--out", str(out), "--delay", "0", "--fail", "tool-day-to-dusk"])
    assert code == 1
    stdout = capsys.readouterr().out
    dusk = next(line for line in stdout.splitlines() if line.startswith("day-to-dusk"))
    assert dusk.split()[2] == "failed"
    assert "4 of 5 done" in stdout
    assert {p.name for p in out.iterdir()} == EXPECTED - {"exterior--day-to-dusk.jpg"}


def test_ctrl_c_exits_130_with_one_line(tmp_path: Path) -> None:
    child = subprocess.Popen(
        [sys.executable, "-m", "asyncsdk", "demo", "--delay", "60"],
        cwd=tmp_path,
        env=subprocess_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None
        for line in child.stdout:
            if line.startswith("sending"):
                break
        child.send_signal(signal.SIGINT)
        _, stderr = child.communicate(timeout=30)
    finally:
        if child.poll() is None:
            child.kill()
            child.communicate()
    assert child.returncode == 130
    assert stderr == "error: interrupted\n"
