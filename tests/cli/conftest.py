"""Helpers of the command-line tests: photo folders, running the CLI in a thread or a process."""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest

from asyncsdk import samples
from asyncsdk.cli import main

ENV_NAMES = ("ASYNCSDK_API_KEY", "ASYNCSDK_BASE_URL", "ASYNCSDK_APP_URL", "ASYNCSDK_WEBHOOK_TOKEN")
FAST_POLLS = ("--poll-interval", "0.05")
"""For ``process`` against a test's sandbox, which has no polling limit (the service's 5 s would
make each run wait 5 s)."""


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """No service settings leak in from the shell running the tests."""
    for name in ENV_NAMES:
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def photos(tmp_path: Path) -> Path:
    """A folder with two sample photos and a file that is not a photo."""
    folder = tmp_path / "photos"
    folder.mkdir()
    for name in ("bedroom-empty.jpg", "living-room-empty.jpg"):
        shutil.copy(samples.path(name), folder / name)
    (folder / "notes.txt").write_text("not a photo\n")
    return folder


async def run_cli(*argv: str | Path) -> int:
    """``main(argv)`` in a worker thread, so that a sandbox in the test's loop keeps serving."""
    return await asyncio.to_thread(main, [str(arg) for arg in argv])


def subprocess_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ENV_NAMES}
    env.update(extra)
    return env


def run_module(
    args: Sequence[str | Path], *, cwd: Path, timeout: float = 60, **env: str
) -> subprocess.CompletedProcess[str]:
    """``python -m asyncsdk ARGS`` in a child process."""
    return subprocess.run(
        [sys.executable, "-m", "asyncsdk", *[str(a) for a in args]],
        cwd=cwd,
        env=subprocess_env(**env),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
