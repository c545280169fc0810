"""``python -m benchmarks.instructions`` counts a server's instructions per delivery under valgrind.

Only that it runs, counts the deliveries it was asked to and reports is checked; the counts
themselves are for the command (as for ``python -m benchmarks``).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def test_the_bare_handlers_instructions_per_delivery_are_counted() -> None:
    if shutil.which("valgrind") is None:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail("CI=true requires valgrind (.ci/run installs it)")
        pytest.skip("valgrind is not installed")
    command = ["-m", "benchmarks.instructions", "--variants", "bare", "--requests", "100"]
    completed = subprocess.run(
        [sys.executable, *command],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert completed.returncode == 0, completed.stdout + completed.stderr
    row = re.search(r"^\| bare aiohttp handler \| ([\d,]+) \| 1\.00 \|", completed.stdout, re.M)
    assert row is not None, completed.stdout
    assert int(row.group(1).replace(",", "")) > 10_000  # an HTTP request's worth, not startup


def test_an_unknown_variant_is_refused_with_the_known_names() -> None:
    completed = subprocess.run(
        [sys.executable, "-m", "benchmarks.instructions", "--variants", "nosuch"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert completed.returncode == 2
    assert "unknown variant(s) nosuch; choose from bare, memory-peer" in completed.stderr
