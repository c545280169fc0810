"""``python -m benchmarks.widget_path`` measures a checked plan and follows ``widgets=`` through
``client.run()``.  The figures are for the command; what is checked is that the walk finds the
catalogue layer, so that a report quoting it does not quote an empty walk."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_walk_follows_widgets_into_the_catalogue_and_out_to_the_request() -> None:
    completed = subprocess.run(
        [sys.executable, "-m", "benchmarks.widget_path", "--calls", "20", "--rounds", "1"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert completed.returncode == 0, completed.stdout + completed.stderr
    assert "CPU per checked prepare, wire widgets:" in completed.stdout
    assert "CPU per checked prepare, short widgets:" in completed.stdout
    walk = completed.stdout.splitlines()[-1].strip().split(" -> ")
    assert walk[0] == "_client.py"
    assert "_catalogue/widgets.py" in walk
    assert "_catalogue/snapshot.py" in walk  # where each name is resolved
