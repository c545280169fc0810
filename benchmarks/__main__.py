"""``python -m benchmarks [--quick] [--only client,upload,...] [--runs N] [--out PATH] [--update]``.

Runs the sections in order and writes the report (default ``benchmarks/RESULTS.md``); with
``--update``, only the sections run (and their goals) are replaced in the report already there.
Every helper process it starts is stopped before it exits, whatever happens.  It exits 1 when a
goal of a section run was missed (:func:`~benchmarks._report.exit_status`), so that a missed goal
fails ``make bench`` instead of passing unread.
"""

from __future__ import annotations

import argparse
import shlex
import sys
import time
from pathlib import Path

from benchmarks._env import machine, versions
from benchmarks._plan import SECTIONS, make_plan
from benchmarks._procs import stop_all
from benchmarks._report import NOTE_START, exit_status, render, splice
from benchmarks._sections import run_section
from benchmarks._shared import Section

DEFAULT_OUT = Path(__file__).resolve().parent / "RESULTS.md"


def _sections(value: str) -> list[str]:
    names = [name.strip() for name in value.split(",") if name.strip()]
    unknown = [name for name in names if name not in SECTIONS]
    if unknown or not names:
        raise argparse.ArgumentTypeError(
            f"unknown section(s) {unknown or value!r}; choose from {', '.join(SECTIONS)}"
        )
    return names


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="small sizes, one run (smoke test)")
    parser.add_argument(
        "--only",
        type=_sections,
        default=list(SECTIONS),
        help=f"comma-separated sections to run: {','.join(SECTIONS)}",
    )
    parser.add_argument("--runs", type=int, default=None, help="runs per figure (default 3)")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="where to write the report")
    parser.add_argument(
        "--update",
        action="store_true",
        help="replace only the sections run (with --only) and their goals in the report at --out, "
        "keeping the others as they were",
    )
    args = parser.parse_args(argv)
    if args.runs is not None and args.runs < 1:
        parser.error("--runs must be at least 1")
    plan = make_plan(quick=args.quick, runs=args.runs)
    command = shlex.join([".venv/bin/python", "-m", "benchmarks", *(argv or sys.argv[1:])])
    started = time.monotonic()
    info = machine()
    sections: list[Section] = []
    try:
        for key in SECTIONS:
            if key not in args.only:
                continue
            print(f"[benchmarks] {key} ...", flush=True)
            section = run_section(key, plan)
            sections.append(section)
            print(f"[benchmarks] {key} done in {section.seconds:.0f} s", flush=True)
    finally:
        stop_all()
    report = render(
        command=command,
        plan=plan,
        machine=info,
        versions=versions(),
        sections=sections,
        skipped=[key for key in SECTIONS if key not in args.only],
        seconds=time.monotonic() - started,
    )
    if args.update and args.out.exists():
        kind = "QUICK smoke run" if plan.quick else f"medians of {plan.runs} runs"
        note = (
            f"{NOTE_START}{', '.join(s.key for s in sections)} run again alone with "
            f"`{command}` on asyncsdk {versions()['asyncsdk']} at "
            f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} ({kind}, "
            f"{(time.monotonic() - started) / 60:.1f} min; load average at its start "
            f"{' / '.join(str(x) for x in info['load_at_start'])}); the other sections are "
            "from the run above."
        )
        report = splice(args.out.read_text(), report, [s.key for s in sections], note)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(report)
    missed = [g for s in sections for g in s.goals if g.met is False]
    print(f"[benchmarks] wrote {args.out} ({len(missed)} goal(s) missed)", flush=True)
    for goal in missed:
        print(f"[benchmarks] missed: {goal.section}: {goal.goal}: {goal.measured}", flush=True)
    return exit_status(sections)


if __name__ == "__main__":
    sys.exit(main())
