"""Turns the sections into ``RESULTS.md``."""

from __future__ import annotations

import datetime
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmarks._plan import SECTIONS, Plan
from benchmarks._shared import Goal, Section, table

FINDINGS = Path(__file__).resolve().parent / "FINDINGS.md"
#: The last soak run (``python -m benchmarks.soak`` writes it); quoted in every report.
SOAK = Path(__file__).resolve().parent / "SOAK.md"
TITLES = {
    "client": "1. Client: processes.create / processes.get",
    "upload": "2. Upload: orders.create against raw aiohttp streaming",
    "receiver": "3. Receiver: process.completed POSTs",
    "registry": "4. Registry: pending waiters",
    "e2e": "5. End to end: completion in the sandbox → `wait()` returns",
    "observe": "6. Metrics and tracing on beside off",
    "asgi": "7. The receiver under uvicorn beside aiohttp",
    "redis": "8. What a delivery costs the Redis server",
}


def exit_status(sections: Sequence[Section]) -> int:
    """``python -m benchmarks``'s exit status: 1 when a goal of ``sections`` was missed, else 0
    (a goal not measured, its server absent, is said so in the report and does not fail)."""
    return 1 if any(goal.met is False for section in sections for goal in section.goals) else 0


def _verdict(met: bool | None) -> str:
    return "not measured" if met is None else ("**met**" if met else "**missed**")


def render(
    *,
    command: str,
    plan: Plan,
    machine: dict[str, Any],
    versions: dict[str, str],
    sections: Sequence[Section],
    skipped: Sequence[str],
    seconds: float,
) -> str:
    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    kind = (
        "QUICK smoke run: small sizes, 1 run"
        if plan.quick
        else f"full run, medians of {plan.runs} runs"
    )
    lines = [
        "# Benchmark results",
        "",
        f"Reproduce with: `{command}` (from the repository root; `make bench` runs the full "
        "suite).  Generated "
        f"{now} in {seconds / 60:.1f} min; {kind}.",
        "",
        "## Machine",
        "",
        *table(
            ["CPU", "cores", "RAM", "kernel", "client/server pinning", "load avg at start"],
            [
                [
                    machine["cpu"],
                    str(machine["cores"]),
                    f"{machine['ram_gib']:.1f} GiB",
                    machine["kernel"],
                    "core 0 / core 1" if machine["pinning"] else "not possible",
                    " / ".join(str(x) for x in machine["load_at_start"]),
                ]
            ],
        ),
        "",
        "The machine is shared: other work may run beside the benchmarks; ratios come from "
        "measurements taken side by side in the same run (implementations interleaved per round).",
        "",
        "## Versions",
        "",
        *table(list(versions), [list(versions.values())]),
        "",
        "## Goals",
        "",
    ]
    goals: list[Goal] = [goal for section in sections for goal in section.goals]
    lines += table(
        ["section", "goal", "measured", "target", "result"],
        [[g.section, g.goal, g.measured, g.target, _verdict(g.met)] for g in goals],
    )
    if skipped:
        lines += ["", f"Sections not run (`--only`): {', '.join(skipped)}."]
    by_key = {section.key: section for section in sections}
    for key in SECTIONS:
        lines += ["", f"## {TITLES[key]}", ""]
        section = by_key.get(key)
        if section is None:
            lines.append("Not run in this invocation (`--only`).")
            continue
        lines += section.lines
        steal = (
            ""
            if math.isnan(section.steal)
            else f"; CPU time taken by the hypervisor for other guests (steal): "
            f"{section.steal * 100:.0f} %"
        )
        lines += ["", f"_Section time: {section.seconds:.0f} s{steal}._"]
    if SOAK.exists():
        # Its own title is demoted one level so it sits among the sections.
        lines += ["", "#" + SOAK.read_text().rstrip()]
    if FINDINGS.exists():
        lines += ["", FINDINGS.read_text().rstrip()]
    return "\n".join(lines) + "\n"


#: How the note of an update (``python -m benchmarks --update``) starts.
NOTE_START = "Section(s) "


def _blocks(text: str) -> list[tuple[str, list[str]]]:
    """``text`` cut at its ``## `` headings: (heading, its lines) in order; the first block's
    heading is empty (the title and the reproduce line)."""
    blocks: list[tuple[str, list[str]]] = [("", [])]
    for line in text.rstrip("\n").split("\n"):
        if line.startswith("## "):
            blocks.append((line, []))
        blocks[-1][1].append(line)
    return blocks


def _goal_rows(lines: Sequence[str]) -> list[str]:
    """The rows of the goals table in a ``## Goals`` block (its header and rule left out)."""
    rows = [line for line in lines if line.startswith("| ")]
    return rows[1:]


def _noted_only(line: str, keys: Sequence[str]) -> bool:
    """Whether ``line`` is the note of an earlier update of some of ``keys`` alone (this update
    replaces it)."""
    if not line.startswith(NOTE_START):
        return False
    names = line[len(NOTE_START) :].split(" run again", 1)[0]
    return {name.strip() for name in names.split(",")} <= set(keys)


def splice(previous: str, fresh: str, keys: Sequence[str], note: str) -> str:
    """``previous`` (a whole report) with the sections ``keys`` and their goal rows taken from
    ``fresh`` (a report of those sections alone), the quoted soak and findings from ``fresh``
    too, and ``note`` after the reproduce line, saying what was run again and when."""
    old, new = _blocks(previous), dict(_blocks(fresh))
    replaced = {f"## {TITLES[key]}" for key in keys}
    sections = {f"## {title}" for title in TITLES.values()}
    kept_rows = [
        row
        for row in _goal_rows(dict(old).get("## Goals", []))
        if row.split("|")[1].strip() not in keys
    ]
    new_rows = _goal_rows(new.get("## Goals", []))
    order = {key: index for index, key in enumerate(SECTIONS)}
    rows = sorted([*kept_rows, *new_rows], key=lambda row: order.get(row.split("|")[1].strip(), -1))
    # A section run that the previous report lacks (a section added since) goes after the
    # section before it in the report's order.
    present = {heading for heading, _ in old}
    added: dict[str | None, list[str]] = {}
    before: str | None = None
    for key in SECTIONS:
        title = f"## {TITLES[key]}"
        if title in present:
            before = title
        elif key in keys:
            added.setdefault(before, []).append(title)
    out: list[str] = []
    for heading, lines in old:
        if heading == "":  # the title, the full run's line, the notes of earlier updates
            kept = [line for line in lines if not _noted_only(line, keys)]
            out += [*kept[:3], note, *kept[3:]]
        elif heading == "## Goals":
            out += [
                heading,
                "",
                *table(
                    ["section", "goal", "measured", "target", "result"],
                    [[cell.strip() for cell in row.split("|")[1:-1]] for row in rows],
                ),
                "",
            ]
            out += [line for title in added.get(None, []) for line in new[title]]
        elif heading in sections or heading in {"## Machine", "## Versions"}:
            out += new[heading] if heading in replaced else lines
            for title in added.get(heading, []):
                out += ["", *new[title]] if out[-1] else new[title]
        elif heading in new:  # the quoted soak and findings, as their files hold them now
            out += new[heading]
        # a quoted block the fresh report no longer has (its file is gone) is left out
    return "\n".join(out) + "\n"
