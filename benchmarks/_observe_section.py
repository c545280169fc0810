"""Section 6: what metrics and tracing on cost, as the client's and the receiver's ratios.

Each ratio is taken as the other sections take it (the SDK against raw aiohttp; the receiver
with a ``MemoryInbox`` against the bare aiohttp handler), once with telemetry off and once with
Prometheus metrics and OpenTelemetry spans on (``_observed.py``: the SDK's batch processor, an
exporter that drops).  The cost is how much lower the ratio is with it on.
"""

from __future__ import annotations

import math
from typing import Any

from benchmarks import _plan as goals
from benchmarks._plan import Plan
from benchmarks._procs import CLIENT_CPU, run_job, serving, which
from benchmarks._receiver_section import receiver_once
from benchmarks._shared import Goal, Section, fmt, met_if_measured, paired, runs_of, table, workdir

MODES = ("metrics", "traced", "sampled")
"""The "on" variants (``_observed.py``), each held against telemetry off."""
MODE_NAMES = {
    "metrics": "metrics",
    "traced": "metrics + every span",
    "sampled": "metrics + 1 trace in 10",
}
CLIENT_IMPLS = ("aiohttp", "sdk", *(f"sdk-{mode}" for mode in MODES))
RECEIVER_VARIANTS = ("bare", "", *MODES)
"""The bare handler, then the receiver (MemoryInbox) off and in each mode."""


def _client_runs(plan: Plan) -> dict[str, list[dict[str, Any]]]:
    results: dict[str, list[dict[str, Any]]] = {impl: [] for impl in CLIENT_IMPLS}
    with serving("_api:serve") as server:
        for _ in range(plan.runs):
            for impl in CLIENT_IMPLS:
                job = {
                    "impl": impl,
                    "requests": plan.client_requests,
                    "concurrency": plan.client_concurrency,
                    "warmup": min(plan.client_warmup, plan.client_requests),
                    "phases": ["create", "get"],
                    **server,
                }
                results[impl].append(run_job("_client_bench:job", job, cpu=CLIENT_CPU))
    return results


def _receiver_runs(plan: Plan) -> dict[str, list[dict[str, Any]]]:
    connections = max(plan.receiver_connections)
    results: dict[str, list[dict[str, Any]]] = {v: [] for v in RECEIVER_VARIANTS}
    with workdir("bench-observe-") as folder:
        for _ in range(plan.runs):
            for variant in RECEIVER_VARIANTS:
                store, observed = ("bare", "") if variant == "bare" else ("memory", variant)
                run = receiver_once(
                    plan, folder, store, False, connections, None, observed=observed
                )
                results[variant].append(run)
    return results


def _cost(off: list[float], on: list[float]) -> tuple[float, str]:
    """1 - on/off of the per-round ratios: the share of the ratio telemetry takes."""
    costs = [1 - b / a if a else math.nan for a, b in zip(off, on, strict=True)]
    known = sorted(c for c in costs if not math.isnan(c))
    cost = known[len(known) // 2] if known else math.nan
    return cost, runs_of([100 * c for c in costs], 1)


def _mid(values: list[float]) -> float:
    return sorted(values)[len(values) // 2] if values else math.nan


def run_observe(plan: Plan) -> Section:
    section = Section("observe", "6. Metrics and tracing on beside off")
    clients = _client_runs(plan)
    receivers = _receiver_runs(plan)

    def rps(runs: list[dict[str, Any]], phase: str | None = None) -> list[float]:
        return [(run[phase] if phase else run)["rps"] for run in runs]

    # (ratio, off per round, {mode: on per round})
    measured: list[tuple[str, list[float], dict[str, list[float]]]] = []
    for phase in ("create", "get"):
        raw = rps(clients["aiohttp"], phase)
        off = paired(rps(clients["sdk"], phase), raw)[1]
        on = {mode: paired(rps(clients[f"sdk-{mode}"], phase), raw)[1] for mode in MODES}
        measured.append((f"client {phase}: SDK / raw aiohttp req/s", off, on))
    bare = rps(receivers["bare"])
    off = paired(rps(receivers[""]), bare)[1]
    on = {mode: paired(rps(receivers[mode]), bare)[1] for mode in MODES}
    connections = max(plan.receiver_connections)
    measured.append((f"receiver, {connections} conns: MemoryInbox / bare req/s", off, on))
    if which("wrk") is None:
        section.lines += [
            "wrk is not installed: the Python load generator may saturate before the receiver, "
            "which hides part of the receiver's cost.",
            "",
        ]
    rows: list[list[str]] = []
    for label, off, on in measured:
        rows.append([label, "off", f"{fmt(_mid(off), 2)} ({runs_of(off, 2)})", ""])
        for mode in MODES:
            cost, per_round = _cost(off, on[mode])
            rows.append(
                [
                    "",
                    MODE_NAMES[mode],
                    f"{fmt(_mid(on[mode]), 2)} ({runs_of(on[mode], 2)})",
                    f"**{fmt(100 * cost, 1)} %** ({per_round})",
                ]
            )
            section.goals.append(
                Goal(
                    "observe",
                    f"{label}, {MODE_NAMES[mode]}: on costs <= {goals.OBSERVED_COST:.0%}",
                    f"{100 * cost:.1f} %",
                    f"<= {goals.OBSERVED_COST:.0%}",
                    met_if_measured(cost, cost <= goals.OBSERVED_COST),
                )
            )
    section.lines += [
        f"Median of {plan.runs} round(s); each round measures off and every mode back to back. "
        " On: `ClientTelemetry` / `ReceiverTelemetry` with `metrics=True`, and for the traced "
        "modes an OpenTelemetry SDK `TracerProvider` (batch processor, an exporter that drops "
        "the spans) recording every span or one trace in ten.  Client: "
        f"{plan.client_requests:,} requests per phase at concurrency {plan.client_concurrency}.",
        "",
        *table(["ratio", "telemetry", "ratio (runs)", "cost of on (runs)"], rows),
    ]
    return section
