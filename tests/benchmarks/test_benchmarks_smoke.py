"""The benchmark suite runs end to end in quick mode and writes a report with its sections.

Only that it runs and reports is checked here: the figures themselves are never asserted (speed is
for ``python -m benchmarks``, not for the test suite).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_quick_run_writes_a_report_with_its_sections(tmp_path: Path) -> None:
    out = tmp_path / "RESULTS.md"
    completed = subprocess.run(
        [
            sys.executable,
            "-m",
            "benchmarks",
            "--quick",
            "--only",
            "upload,registry",
            "--out",
            str(out),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert completed.returncode == 0, completed.stdout + completed.stderr
    report = out.read_text()
    for heading in (
        "# Benchmark results",
        "## Machine",
        "## Versions",
        "## Goals",
        "## 1. Client",
        "## 2. Upload",
        "## 3. Receiver",
        "## 4. Registry",
        "## 5. End to end",
    ):
        assert heading in report, f"{heading!r} missing from the report"
    assert "--quick --only upload,registry --out" in report  # the command that reproduces it
    assert "bytes per waiter" in report
    assert "| upload | 1 x 128 MiB" in report  # the upload's goals made it into the goals table
    assert "| registry |" not in report  # the registry's figures are figures, not goals
    assert report.count("Not run in this invocation (`--only`).") == 6
    for version in ("Python", "aiohttp", "httpx", "redis-py", "asyncsdk"):
        assert f"| {version} |" in report or f"| {version}" in report


def test_an_unknown_section_is_refused_with_the_known_names(tmp_path: Path) -> None:
    completed = subprocess.run(
        [sys.executable, "-m", "benchmarks", "--only", "nosuch", "--out", str(tmp_path / "x.md")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert completed.returncode == 2
    assert "client, upload, receiver, registry, e2e" in completed.stderr
    assert not (tmp_path / "x.md").exists()


def _block(report: str, heading: str) -> str:
    """The lines of ``report`` from ``heading`` to the next heading of its level."""
    start = report.index(heading)
    end = report.find("\n## ", start + len(heading))
    return report[start : None if end < 0 else end]


def _update_upload(out: Path) -> None:
    """``python -m benchmarks --quick --only upload --update --out OUT``, which must succeed."""
    command = [sys.executable, "-m", "benchmarks", "--quick", "--only", "upload", "--update"]
    completed = subprocess.run(
        [*command, "--out", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert completed.returncode == 0, completed.stdout + completed.stderr


@pytest.mark.slow
def test_an_update_replaces_the_sections_run_and_keeps_the_others(tmp_path: Path) -> None:
    out = tmp_path / "RESULTS.md"
    before = (ROOT / "benchmarks" / "RESULTS.md").read_text()
    out.write_text(before)
    for _ in range(2):
        _update_upload(out)
    after = out.read_text()
    assert after.count("Section(s) upload run again alone with `") == 1, "one note, the last"
    for kept in ("## Machine", "## 1. Client", "## 3. Receiver", "## 6. Metrics and tracing"):
        assert _block(after, kept) == _block(before, kept), f"{kept!r} changed"
    goals_before, goals_after = _block(before, "## Goals"), _block(after, "## Goals")
    assert [row for row in goals_after.splitlines() if row.startswith("| client |")] == [
        row for row in goals_before.splitlines() if row.startswith("| client |")
    ]
    upload_rows = [row for row in goals_after.splitlines() if row.startswith("| upload |")]
    assert [row.split("|")[2] for row in upload_rows] == [
        " 1 x 128 MiB (sdk-raised-limit): peak RSS growth <= 8 MiB ",
        " 20 x 1 MiB (sdk): peak RSS growth <= 8 MiB ",
        " 1 x 16 MiB (sdk): peak RSS growth <= 8 MiB ",
    ], "the quick run's rows replace the full run's"
    assert _block(after, "## 2. Upload") != _block(before, "## 2. Upload")


def test_an_update_adds_a_section_the_report_lacks_in_its_place(tmp_path: Path) -> None:
    # A report written before a section existed: its upload section is cut out.
    out = tmp_path / "RESULTS.md"
    before = (ROOT / "benchmarks" / "RESULTS.md").read_text()
    out.write_text(before.replace(_block(before, "## 2. Upload"), ""))
    _update_upload(out)
    after = out.read_text()
    headings = [line for line in after.splitlines() if line.startswith("## ")]
    sections = [heading for heading in headings if heading[3].isdigit()]
    assert sections == sorted(sections), sections
    assert "## 2. Upload: orders.create against raw aiohttp streaming" in sections
    assert "16 MiB" in _block(after, "## 2. Upload")  # the quick run's figures
