"""Section 6: what metrics and tracing on cost, in CPU per request, beside telemetry off.

Each helper process holds telemetry off and every "on" mode at once and takes turns between them
(``_observe_bench.py``): the client's CPU per request, and the receiver's server CPU per request
(``MemoryInbox``, no handler).  The cost of a mode is how much more CPU a request takes with it
on than with telemetry off in the same round of the same process; the figure is the median over
every round of every run.  On: Prometheus metrics, and for the traced modes OpenTelemetry spans
through the SDK's batch processor to an exporter that drops them (``_observed.py``).
"""

from __future__ import annotations

import math
import uuid
from typing import Any, Final

from benchmarks import _plan as goals
from benchmarks._env import median
from benchmarks._load import run_load
from benchmarks._observe_bench import VARIANTS, turn
from benchmarks._plan import Plan
from benchmarks._procs import CLIENT_CPU, SERVER_CPU, Child, run_job, serving, which
from benchmarks._shared import Goal, Section, fmt, met_if_measured, runs_of, table, workdir

MODE_NAMES: Final = {
    "off": "off",
    "metrics": "metrics",
    "traced": "metrics + every span",
    "sampled": "metrics + 1 trace in 10",
}
PHASES: Final = ("create", "get")
ROUNDS_PER_RUN: Final = 4
"""Turns each helper process takes through the variants: a figure rests on runs x rounds pairs."""


def _block_requests(plan: Plan) -> int:
    """Requests in one block of the client's turns: a quarter of a client phase."""
    return max(1, plan.client_requests // 4)


def _block_seconds(plan: Plan) -> int:
    """Seconds of one load in the receivers' turns: half a receiver load."""
    return max(1, plan.receiver_seconds // 2)


Blocks = dict[str, list[dict[str, Any]]]
"""Per variant, its blocks in round order (every run's rounds one after the other)."""


def _client_blocks(plan: Plan) -> dict[str, Blocks]:
    """Per phase, the client's blocks."""
    blocks: dict[str, Blocks] = {phase: {v: [] for v in VARIANTS} for phase in PHASES}
    with serving("_api:serve") as server:
        for _ in range(plan.runs):
            job = {
                "requests": _block_requests(plan),
                "concurrency": plan.client_concurrency,
                "warmup": min(plan.client_warmup, plan.client_requests),
                "rounds": ROUNDS_PER_RUN,
                "phases": list(PHASES),
                **server,
            }
            result = run_job("_observe_bench:client_job", job, cpu=CLIENT_CPU, timeout=900)
            for phase in PHASES:
                for variant in VARIANTS:
                    blocks[phase][variant] += result[phase][variant]
    return blocks


def _receiver_blocks(plan: Plan, connections: int) -> Blocks:
    """The receivers' blocks: one load of ``connections`` each, the server's CPU around it."""
    seconds = _block_seconds(plan)
    blocks: Blocks = {v: [] for v in VARIANTS}
    with workdir("bench-observe-") as folder:
        for _ in range(plan.runs):
            child = Child("_observe_bench:serve", {}, cpu=SERVER_CPU)
            try:
                urls = child.ready()["urls"]
                for variant in VARIANTS:
                    run = uuid.uuid4().hex[:10]
                    run_load(
                        urls[variant], connections, plan.receiver_warmup_seconds, folder, run, None
                    )
                for number in range(ROUNDS_PER_RUN):
                    for variant in turn(number):
                        run = uuid.uuid4().hex[:10]
                        child.send("mark")
                        child.recv()
                        load, _ = run_load(urls[variant], connections, seconds, folder, run, None)
                        child.send("stats")
                        cpu_s = child.recv()["cpu_s"]
                        blocks[variant].append(
                            {
                                "rps": load["requests"] / (load["duration_us"] / 1e6),
                                "cpu_us": cpu_s / max(1, load["requests"]) * 1e6,
                                "bad": load["errors"] + load["non_2xx"],
                            }
                        )
            finally:
                child.stop()
    return blocks


def costs(blocks: Blocks, mode: str) -> list[float]:
    """Per round, how much more CPU a request took with ``mode`` on than with telemetry off."""
    return [
        on["cpu_us"] / off["cpu_us"] - 1 if off["cpu_us"] else math.nan
        for off, on in zip(blocks["off"], blocks[mode], strict=True)
    ]


def run_observe(plan: Plan) -> Section:
    section = Section("observe", "6. Metrics and tracing on beside off")
    clients = _client_blocks(plan)
    connections = max(plan.receiver_connections)
    receivers = _receiver_blocks(plan, connections)
    measured = [(f"client {phase}: CPU per request", clients[phase]) for phase in PHASES]
    measured.append((f"receiver, {connections} conns: server CPU per request", receivers))
    if which("wrk") is None:
        section.lines += [
            "wrk is not installed: the receiver's loads come from the Python load generator, "
            "which may saturate before the server (its CPU per request is still the server's).",
            "",
        ]
    rows: list[list[str]] = []
    for label, blocks in measured:
        for variant in VARIANTS:
            cpu = [block["cpu_us"] for block in blocks[variant]]
            rps = [block["rps"] for block in blocks[variant]]
            cost_cell = ""
            if variant != "off":
                per_round = costs(blocks, variant)
                cost = median([c for c in per_round if not math.isnan(c)])
                cost_cell = (
                    f"**{fmt(100 * cost, 1)} %** ({runs_of([100 * c for c in per_round], 1)})"
                )
                section.goals.append(
                    Goal(
                        "observe",
                        f"{label}, {MODE_NAMES[variant]} on: costs <= "
                        f"{goals.OBSERVED_COST:.0%} over off",
                        f"{100 * cost:.1f} %",
                        f"<= {goals.OBSERVED_COST:.0%}",
                        met_if_measured(cost, cost <= goals.OBSERVED_COST),
                    )
                )
            rows.append(
                [
                    label if variant == "off" else "",
                    MODE_NAMES[variant],
                    f"{fmt(median(cpu))} ({runs_of(cpu)})",
                    fmt(median(rps)),
                    cost_cell,
                ]
            )
    bad = sum(block["bad"] for blocks in receivers.values() for block in blocks)
    section.lines += [
        f"{plan.runs} helper process(es) per figure, each taking {ROUNDS_PER_RUN} turns through "
        "telemetry off and the three modes on, in a rotating order; a mode's cost is the "
        "median, over every turn, of its CPU per request over that of off in the same turn. "
        " On: `ClientTelemetry` / `ReceiverTelemetry` with `metrics=True`, and for the traced "
        "modes an OpenTelemetry SDK `TracerProvider` (batch processor, an exporter that drops "
        "the spans) recording every span or one trace in ten.  CPU is `time.process_time()` of "
        "the measured process (every thread, the span processor's among them).  Client: one "
        f"`Client` per variant in one process, blocks of {_block_requests(plan):,} "
        f"requests at concurrency {plan.client_concurrency}.  Receiver: one `WebhookReceiver` "
        "(`MemoryInbox`, no handler) per variant mounted on one application, "
        f"{_block_seconds(plan)} s loads of {connections} connections flat out; "
        f"non-2xx answers or errors: {bad}.",
        "",
        *table(["figure", "telemetry", "CPU us/req (turns)", "req/s", "cost of on (turns)"], rows),
    ]
    return section
