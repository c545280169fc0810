"""Costs cannot creep: the client's and the receiver's instructions per request, counted under
valgrind, stay within their tolerance of ``benchmarks/baseline.json``; and a missed goal of
``python -m benchmarks`` fails the command.

The gate's comparison and the report's exit status are the benchmarks' own code
(``benchmarks.instructions``, ``benchmarks._report``), not the package's: there is no public name
to test them through, hence the imports.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks._report import exit_status
from benchmarks._shared import Goal, Section
from benchmarks._stores import problems
from benchmarks.instructions import (
    GATE_VARIANTS,
    RECORD_COMMAND,
    compare,
    counted_again,
    read_baseline,
    tolerance,
)

ROOT = Path(__file__).resolve().parents[2]


def _recorded() -> dict[str, float]:
    counts: dict[str, float] = read_baseline()["counts"]  # type: ignore[assignment]
    return counts


# The stores batch what arrives together, so a busy machine (other tests beside this one) makes
# smaller batches and more instructions per delivery: `make test` runs this after the others.
@pytest.mark.alone
def test_the_client_and_the_receivers_cost_no_more_than_their_baseline() -> None:
    missing = [
        problem
        for problem in (
            None if shutil.which("valgrind") else "valgrind is not installed",
            *problems().values(),  # every store's server the gate counts on
        )
        if problem
    ]
    if missing:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"CI=true requires what the gate counts on: {'; '.join(missing)}")
        pytest.skip("; ".join(missing))
    completed = subprocess.run(
        [sys.executable, "-m", "benchmarks.instructions", "--check"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert completed.returncode == 0, completed.stdout + completed.stderr
    for name in ("processes.create, a new asset each", "processes.get", "RedisInbox"):
        assert name in completed.stdout


def test_the_baseline_holds_every_variant_the_gate_counts() -> None:
    assert set(_recorded()) == set(GATE_VARIANTS)


@pytest.mark.parametrize("variant", GATE_VARIANTS)
def test_a_request_5_percent_dearer_fails_the_gate_with_the_figure_and_the_fix(
    variant: str,
) -> None:
    recorded = _recorded()
    dearer = recorded[variant] * 1.05
    failures = compare({variant: dearer}, recorded)
    assert len(failures) == 1
    assert f"{dearer:,.0f} instructions per request, +5.0 % over" in failures[0]
    assert RECORD_COMMAND in failures[0]
    within = recorded[variant] * (1 + tolerance(variant) - 0.005)
    assert compare({variant: within}, recorded) == []
    assert compare({variant: recorded[variant] * 0.8}, recorded) == []  # cheaper passes


def test_a_count_over_its_tolerance_is_counted_again_and_judged_on_the_lower() -> None:
    recorded = {"memory": 100.0, "postgres": 100.0}
    asked: list[list[str]] = []

    def again(variants: list[str]) -> dict[str, float]:
        asked.append(variants)
        return {"postgres": 101.0}  # a count that lay high by chance

    counts = counted_again({"memory": 100.5, "postgres": 106.0}, recorded, again)
    assert asked == [["postgres"]]  # only the variant over its tolerance
    assert counts == {"memory": 100.5, "postgres": 101.0}
    assert compare(counts, recorded) == []
    meant = counted_again({"postgres": 106.0}, recorded, lambda _: {"postgres": 105.5})
    assert len(compare(meant, recorded)) == 1  # a cost meant shows twice: it still fails
    untouched = counted_again({"memory": 100.0}, recorded, lambda _: pytest.fail("counted again"))
    assert untouched == {"memory": 100.0}


def test_a_count_with_no_baseline_fails_and_says_how_to_record_one() -> None:
    assert compare({"memory": 1.0}, {}) == [
        f"receiver + MemoryInbox: no baseline; record one with {RECORD_COMMAND}"
    ]


def test_a_missed_goal_fails_the_benchmarks_command_and_one_not_measured_does_not() -> None:
    def section(met: bool | None) -> Section:
        return Section("client", "1. Client", goals=[Goal("client", "g", "0.7x", ">= 0.8", met)])

    assert exit_status([section(True), section(None)]) == 0
    assert exit_status([section(True), section(False)]) == 1
