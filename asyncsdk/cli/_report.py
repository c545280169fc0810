"""What ``process`` prints: the plan before, the table and the summary after, the dry run."""

from __future__ import annotations

import os
import sys
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

from asyncsdk.cli._pace import GenerationPace, roughly, span
from asyncsdk.cli._photo_job import JobResult
from asyncsdk.cli._state import FAILED
from asyncsdk.cli._tables import format_table

__all__ = ["announce", "dry_run", "results_table", "summary", "timing"]


def announce(total: int, counts: Counter[str], earlier: Sequence[JobResult]) -> None:
    parts = []
    if counts["new"]:
        parts.append(f"{counts['new']} new")
    resumed = counts["resume"] + counts["adopt"]
    if resumed:
        parts.append(f"{resumed} resumed from an earlier run")
    skipped = sum(1 for r in earlier if r.status == "skipped")
    if skipped:
        parts.append(f"{skipped} already done")
    failed = sum(1 for r in earlier if r.status == FAILED)
    if failed:
        parts.append(f"{failed} failed before (--retry-failed to run them again)")
    print(f"{total} photo(s): {', '.join(parts) or 'nothing to do'}")
    sys.stdout.flush()


def results_table(results: Sequence[JobResult]) -> str:
    rows = []
    for result in results:
        outputs = ", ".join(str(p) for p in result.outputs) or result.error or "-"
        seconds = f"{result.seconds:.1f}" if result.status != "skipped" else "-"
        rows.append([str(result.spec.photo), result.status, seconds, outputs])
    return format_table(["photo", "status", "seconds", "output"], rows)


def summary(results: Sequence[JobResult], out_dir: Path) -> str:
    counts = Counter(result.status for result in results)
    parts = [f"{count} {status}" for status, count in sorted(counts.items())]
    return f"{', '.join(parts)}; results in {out_dir}{os.sep}"


def timing(seconds: float, generations: int, least: float, limit: GenerationPace | None) -> str:
    """``took 8 m 31 s, against 8 m 00 s at least under the generation limit (10 per 10 min)
    for 55 generation(s)``: how close the batch came to the pace the limit allows."""
    text = f"took {span(seconds)}"
    if limit is None or not generations:
        return text
    if least < 1:
        return f"{text}; {generations} generation(s) fit the generation limit ({limit}) at once"
    return (
        f"{text}, against {span(least)} at least under the generation limit ({limit}) for "
        f"{generations} generation(s)"
    )


def dry_run(
    rows: Sequence[Sequence[str]],
    generations: int,
    least: float,
    limit: GenerationPace | None,
) -> str:
    """The plan of a dry run, and how long the generation limit makes it at least."""
    lines = [format_table(["photo", "action", "results"], rows), ""]
    if not generations:
        lines.append("dry run: nothing would be created")
    elif limit is None:
        lines.append(f"dry run: would create {generations} process(es)")
    else:
        lines.append(
            f"dry run: would create {generations} process(es); at {limit} the last starts in "
            f"{roughly(least)}, then it is processed"
        )
    return "\n".join(lines)
