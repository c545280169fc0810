"""What the test run builds once and every test process reads: the wheel, the docs site."""

from __future__ import annotations

import fcntl
import os
from collections.abc import Callable
from pathlib import Path

import pytest


def built_once(
    tmp_path_factory: pytest.TempPathFactory, name: str, build: Callable[[Path], None]
) -> Path:
    """The folder ``name``, filled by ``build`` once for the whole run.

    With pytest-xdist, the first test process that asks builds it in the folder the processes
    share, while the others wait on its lock; so the tests that read it need not share one
    process.  A build that fails leaves no mark: the next process to ask builds it again (and
    its tests fail with the same error)."""
    shared = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        shared = shared.parent  # each process's base folder is one of the run's
    out = shared / name
    with (shared / f"{name}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        done = shared / f"{name}.built"
        if not done.exists():
            out.mkdir(exist_ok=True)
            build(out)
            done.touch()
    return out
