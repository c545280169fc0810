"""Section 5: a completion in the sandbox until ``wait()`` returns."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from benchmarks._env import REDIS_URL, percentile
from benchmarks._plan import Plan
from benchmarks._procs import run_job
from benchmarks._shared import (
    Section,
    drop_prefix,
    fmt,
    new_prefix,
    redis_problem,
    table,
    workdir,
)


def run_e2e(plan: Plan) -> Section:
    section = Section("e2e", "5. End to end: completion in the sandbox → `wait()` returns")
    redis_reason = redis_problem()
    paths: list[tuple[str, str, float, int]] = [
        ("webhook: receiver + MemoryInbox + Registry", "webhook-memory", 5.0, 0),
        ("webhook: receiver + SQLiteInbox + RedisRegistry", "webhook-sqlite-redis", 5.0, 0),
        (f"polling, min_poll_interval={plan.poll_default:g} s (default)", "poll", 5.0, 1),
        (f"polling, min_poll_interval={plan.poll_small:g} s", "poll", plan.poll_small, 1),
    ]
    results: dict[str, list[dict[str, Any]]] = {label: [] for label, *_ in paths}
    with workdir("bench-e2e-") as folder:
        for round_number in range(plan.runs):
            for label, path, interval, polling in paths:
                if path == "webhook-sqlite-redis" and redis_reason:
                    continue
                prefix = new_prefix("e2e")
                run_dir = folder / f"{round_number}-{path}-{interval}"
                run_dir.mkdir()
                try:
                    results[label].append(
                        run_job(
                            "_e2e_bench:job",
                            {
                                "path": path,
                                "samples": plan.e2e_poll_samples
                                if polling
                                else plan.e2e_webhook_samples,
                                "interval": interval,
                                "workdir": str(run_dir),
                                "redis_url": REDIS_URL,
                                "prefix": prefix,
                            },
                            cpu=None,
                            timeout=300,
                        )
                    )
                finally:
                    drop_prefix(prefix)
    rows = []
    p50_of: dict[str, float] = {}
    for label, *_ in paths:
        runs = results[label]
        if not runs:
            rows.append([label, "not run", "", "", "", redis_reason or ""])
            continue
        pooled = [x * 1000 for run in runs for x in run["latencies"]]
        p50_of[label] = percentile(pooled, 50)
        rows.append(
            [
                label,
                str(len(pooled)),
                f"**{fmt(percentile(pooled, 50), 1)}**",
                fmt(statistics_mean(pooled), 1),
                fmt(percentile(pooled, 90), 1),
                fmt(max(pooled), 1),
            ]
        )
    section.lines += [
        "One fresh process per path and run (sandbox, client and receiver in one event loop, "
        "not pinned).  The sandbox holds each process at `processing` until `advance()`; the "
        "latency runs from `advance()` (the completion) to `client.processes.wait()` returning "
        "(`time.monotonic()`).  Webhook path: one process at a time, the client waits with "
        "`registry=` (the receiver feeds that registry).  Polling path: waiters whose polls are "
        "spread evenly over one interval, released together, so the figures sample every phase "
        f"of the poll cycle.  Pooled over {plan.runs} run(s).",
        "",
        *table(["path", "samples", "p50 ms", "mean ms", "p90 ms", "max ms"], rows),
    ]
    webhook = p50_of.get(paths[0][0], math.nan)
    polled = p50_of.get(paths[2][0], math.nan)
    if not math.isnan(webhook) and not math.isnan(polled):
        section.lines += [
            "",
            f"Median latency, polling at the default interval / webhook path: "
            f"**{polled / webhook:,.0f} x**.",
        ]
    return section


def statistics_mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else math.nan
