"""``python -m benchmarks.trace_instructions [--requests N]``: what telemetry adds to a request,
as instructions counted by valgrind, which the machine's load does not move.

Section 6 of the suite times each mode of telemetry beside off in CPU per request, where a block
moves by 10 to 30 % from the next on a shared machine and a dropped span is a few percent.  Here
one client (``processes.get`` against the minimal server, 16 at a time) and one receiver
(``MemoryInbox``, no handler, 16 connections, every delivery a new event) per mode run under
``valgrind --tool=callgrind`` with counting off; after a warm-up, counting is switched on for
``N`` requests and the count is read back.  Modes: those of ``_observed.py`` (metrics alone;
spans alone, none sampled, one trace in ten, every one).  Instructions are not time: the
request path runs colder than a loop of spans, but what a mode adds is in proportion.  Needs
valgrind (Debian: ``apt-get install valgrind``).

Then the spans of one request apart, as ``_spans_bench.py`` times them: a client attempt's hooks
and a delivery's, with telemetry off, with tracing on, and the SDK starting and ending as many
spans itself, under each sampler, ``--units`` of each counted the same way.
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import sys
import tempfile
import uuid
from pathlib import Path
from typing import Final

from benchmarks._observe_bench import VARIANTS
from benchmarks._observed import SAMPLERS
from benchmarks._procs import Child, serving
from benchmarks._shared import fmt, table
from benchmarks.instructions import (
    STARTUP_TIMEOUT,
    _callgrind,
    _deliver,
    callgrind_wrapper,
    counted_instructions,
    counted_run,
)

CONCURRENCY: Final = 16


def client(variant: str, requests: int, server: dict[str, str], folder: Path) -> float:
    """Instructions per ``processes.get`` of a client with telemetry ``variant``."""
    out = folder / f"client-{variant}.callgrind"
    job = {**server, "variant": variant, "requests": requests, "concurrency": CONCURRENCY}
    return counted_run("_observe_bench:counted_client", job, out, within=60 * 30) / requests


def receiver(variant: str, requests: int, folder: Path) -> float:
    """Instructions per delivery of a receiver (``MemoryInbox``) with telemetry ``variant``."""
    run = uuid.uuid4().hex[:10]
    out = folder / f"receiver-{variant}.callgrind"
    (folder / run).mkdir()
    job = {
        "store": "memory",
        "workdir": str(folder / run),
        "observed": "" if variant == "off" else variant,
    }
    child = Child("_receiver_bench:serve", job, wrapper=callgrind_wrapper(out))
    try:
        url = child.ready(timeout=STARTUP_TIMEOUT)["url"]
        refused = asyncio.run(_deliver(url, max(100, requests // 5), "warm-" + run))
        _callgrind(child.pid, "--instr=on")
        refused += asyncio.run(_deliver(url, requests, run))
        _callgrind(child.pid, "--dump")
    finally:
        child.stop()
    if refused:
        raise SystemExit(f"receiver {variant}: {refused} deliveries not answered 200")
    return counted_instructions(out) / requests


def units(unit: str, variant: str, mode: str, count: int, folder: Path) -> float:
    """Instructions per unit of ``_spans_bench.py`` (a client attempt's hooks, a delivery's)."""
    out = folder / f"units-{uuid.uuid4().hex[:10]}.callgrind"
    job = {"unit": unit, "variant": variant, "mode": mode, "count": count}
    return counted_run("_spans_bench:counted_units", job, out, within=60 * 10) / count


def _unit_rows(count: int, folder: Path) -> list[list[str]]:
    """Per unit and sampler: ours and the SDK's own over off, in instructions."""
    rows = []
    for unit in ("client attempt", "webhook delivery"):
        for mode in SAMPLERS:
            print(f"[trace_instructions] {unit}, {mode} ...", file=sys.stderr, flush=True)
            found = {v: units(unit, v, mode, count, folder) for v in ("off", "ours", "sdk")}
            ours, sdk = found["ours"] - found["off"], found["sdk"] - found["off"]
            rows.append(
                [
                    unit if mode == "unsampled" else "",
                    mode,
                    f"{ours:,.0f}",
                    f"{sdk:,.0f}",
                    f"{ours - sdk:+,.0f}",
                ]
            )
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.trace_instructions")
    parser.add_argument("--requests", type=int, default=2000, help="requests counted per mode")
    parser.add_argument("--units", type=int, default=5000, help="span units counted per variant")
    args = parser.parse_args(argv)
    if shutil.which("valgrind") is None or shutil.which("callgrind_control") is None:
        parser.error("valgrind is needed: apt-get install valgrind")
    counts: dict[str, dict[str, float]] = {"client get": {}, "receiver delivery": {}}
    with tempfile.TemporaryDirectory(prefix="bench-trace-instructions-") as tmp:
        folder = Path(tmp)
        with serving("_api:serve") as server:
            for variant in VARIANTS:
                print(f"[trace_instructions] client {variant} ...", file=sys.stderr, flush=True)
                counts["client get"][variant] = client(variant, args.requests, server, folder)
        for variant in VARIANTS:
            print(f"[trace_instructions] receiver {variant} ...", file=sys.stderr, flush=True)
            counts["receiver delivery"][variant] = receiver(variant, args.requests, folder)
        unit_rows = _unit_rows(args.units, folder)
    rows = []
    for side, found in counts.items():
        off = found["off"]
        for variant, mine in found.items():
            rows.append(
                [
                    side if variant == "off" else "",
                    variant,
                    f"{mine:,.0f}",
                    "" if variant == "off" else f"{mine - off:+,.0f}",
                    "" if variant == "off" else f"{fmt(100 * (mine / off - 1), 1)} %",
                ]
            )
    print(
        "\n".join(
            [
                f"Instructions per request (valgrind's callgrind), {args.requests:,} requests "
                f"per mode after a warm-up, {CONCURRENCY} at a time.",
                "",
                *table(["request", "telemetry", "instructions", "over off", "over off, %"], rows),
                "",
                f"The spans of one request apart (`_spans_bench.py`'s units, {args.units:,} per "
                "variant, after a warm-up): instructions over the hooks with telemetry off, ours "
                "beside the SDK starting and ending as many spans itself under the same sampler.",
                "",
                *table(
                    ["unit", "sampler", "ours", "SDK's own", "ours beyond the SDK's"], unit_rows
                ),
            ]
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
