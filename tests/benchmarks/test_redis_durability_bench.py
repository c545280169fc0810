"""``python -m benchmarks.redis_durability`` runs end to end in a small run and prints its rows.

Only that it runs and prints each configuration is checked: the figures are for the benchmark.
It starts Redis servers of its own; without ``redis-server`` it is skipped (failed under CI=true).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from own_servers import program

ROOT = Path(__file__).resolve().parents[2]


def test_a_small_run_prints_a_row_per_durability() -> None:
    program("redis-server")  # skips without it (fails under CI=true)
    completed = subprocess.run(
        [sys.executable, "-m", "benchmarks.redis_durability", "40", "1"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert completed.returncode == 0, completed.stdout + completed.stderr
    rows = [line for line in completed.stdout.splitlines() if line.startswith("| ")]
    assert rows[0].startswith("| durability | deliveries/s | p50 ms | p99 ms")
    assert [row.split(" | ")[0] for row in rows[1:]] == [
        "| relaxed, appendfsync everysec",
        "| strict, appendfsync always",
        "| strict, replicas=1 (WAIT)",
    ]
