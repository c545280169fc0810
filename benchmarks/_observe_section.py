"""Section 6: what metrics and tracing on cost, in CPU per request, beside telemetry off.

Each helper process holds telemetry off and every "on" mode at once and takes turns between them
(``_observe_bench.py``): the client's CPU per request, and the receiver's server CPU per request
(``MemoryInbox``, no handler).  The cost of a mode is how much more CPU a request takes with it
on than with telemetry off in the same round of the same process; the figure is the median over
every round of every run.  On: Prometheus metrics alone, or OpenTelemetry spans alone under a
sampler that records none, one trace in ten, or every span, recorded ones through the SDK's batch
processor to an exporter that drops them (``_observed.py``).  Beside them, the spans of one
request apart (``_spans_bench.py``): ours, against the SDK starting and ending as many spans
itself, dropped and recorded.
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
from benchmarks._spans_bench import SAMPLED, UNITS, beyond_sdk, per_span

MODE_NAMES: Final = {
    "off": "off",
    "metrics": "metrics",
    "unsampled": "spans, none sampled (ALWAYS_OFF)",
    "sampled": "spans, 1 trace in 10",
    "traced": "spans, every one recorded",
}
SPANS_PER_REQUEST: Final = {"client": 1, "receiver": 2}
"""A client request is one attempt, one span; a delivery a server span and a dispatch span."""
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


def _span_figures(plan: Plan) -> dict[str, dict[str, Any]]:
    """Per unit of ``_spans_bench.py``, its figures over every round of every run."""
    figures: dict[str, dict[str, Any]] = {}
    for _ in range(plan.runs):
        job = {"spans": plan.spans, "rounds": ROUNDS_PER_RUN}
        result = run_job("_spans_bench:span_job", job, cpu=CLIENT_CPU, timeout=900)
        for unit, found in result.items():
            mine = figures.setdefault(unit, {"spans": found["spans"]})
            for name, values in found.items():
                if name != "spans":
                    mine[name] = mine.get(name, []) + values
    return figures


def _sdk_per_request(spans: dict[str, dict[str, Any]], side: str, mode: str) -> float:
    """What the SDK alone spends on the spans of one request of ``side`` under ``mode``."""
    unit = "client attempt" if side == "client" else "webhook delivery"
    dropped = per_span(spans[unit], "dropped sdk")
    recorded = per_span(spans[unit], "recorded sdk")
    each = {"unsampled": dropped, "sampled": 0.9 * dropped + 0.1 * recorded, "traced": recorded}
    return SPANS_PER_REQUEST[side] * each[mode] if mode in each else math.nan


def _request_goal(section: Section, label: str, side: str, variant: str, cost: float) -> None:
    if variant == "metrics":
        limit = goals.OBSERVED_COST
    elif variant == "sampled":
        limit = goals.SAMPLED_COST[side]
    else:
        return  # spans none or all sampled: their goals are per span, in the table below
    section.goals.append(
        Goal(
            "observe",
            f"{label}, {MODE_NAMES[variant]}: costs <= {limit:.0%} over off",
            f"{100 * cost:.1f} %",
            f"<= {limit:.0%}",
            met_if_measured(cost, cost <= limit),
        )
    )


def _span_rows(section: Section, spans: dict[str, dict[str, Any]]) -> list[list[str]]:
    rows: list[list[str]] = []
    for unit, figures in spans.items():
        off = median(figures["off"])
        for kind in SAMPLED:
            ours = [on - o for on, o in zip(figures[f"{kind} ours"], figures["off"], strict=True)]
            beyond = beyond_sdk(figures, kind)
            extra = median(beyond)
            limit = goals.SPAN_BEYOND_SDK_US[kind]
            rows.append(
                [
                    unit if kind == "dropped" else "",
                    str(UNITS[unit]) if kind == "dropped" else "",
                    fmt(off, 2) if kind == "dropped" else "",
                    kind,
                    fmt(median(ours), 2),
                    fmt(median(figures[f"{kind} sdk"]), 2),
                    f"**{fmt(extra, 2)}** ({runs_of(beyond, 2)})",
                    f"<= {limit:g}",
                ]
            )
            section.goals.append(
                Goal(
                    "observe",
                    f"{unit}, span {kind}: ours costs <= the SDK's own + {limit:g} us per span",
                    f"+{extra:.2f} us (SDK {per_span(figures, f'{kind} sdk'):.2f} us)",
                    f"<= +{limit:g} us",
                    met_if_measured(extra, extra <= limit),
                )
            )
    return rows


def run_observe(plan: Plan) -> Section:
    section = Section("observe", "6. Metrics and tracing on beside off")
    spans = _span_figures(plan)
    clients = _client_blocks(plan)
    connections = max(plan.receiver_connections)
    receivers = _receiver_blocks(plan, connections)
    measured = [(f"client {phase}: CPU per request", "client", clients[phase]) for phase in PHASES]
    measured.append(
        (f"receiver, {connections} conns: server CPU per request", "receiver", receivers)
    )
    if which("wrk") is None:
        section.lines += [
            "wrk is not installed: the receiver's loads come from the Python load generator, "
            "which may saturate before the server (its CPU per request is still the server's).",
            "",
        ]
    rows: list[list[str]] = []
    for label, side, blocks in measured:
        for variant in VARIANTS:
            cpu = [block["cpu_us"] for block in blocks[variant]]
            rps = [block["rps"] for block in blocks[variant]]
            cost_cell = over_cell = ""
            if variant != "off":
                per_round = costs(blocks, variant)
                cost = median([c for c in per_round if not math.isnan(c)])
                cost_cell = (
                    f"**{fmt(100 * cost, 1)} %** ({runs_of([100 * c for c in per_round], 1)})"
                )
                over = [
                    on["cpu_us"] - off["cpu_us"]
                    for off, on in zip(blocks["off"], blocks[variant], strict=True)
                ]
                over_cell = fmt(median(over), 1)
                _request_goal(section, label, side, variant, cost)
            rows.append(
                [
                    label if variant == "off" else "",
                    MODE_NAMES[variant],
                    f"{fmt(median(cpu))} ({runs_of(cpu)})",
                    fmt(median(rps)),
                    cost_cell,
                    over_cell,
                    fmt(_sdk_per_request(spans, side, variant), 1),
                ]
            )
    bad = sum(block["bad"] for blocks in receivers.values() for block in blocks)
    section.lines += [
        f"{plan.runs} helper process(es) per figure, each taking {ROUNDS_PER_RUN} turns through "
        "telemetry off and the four modes on, in a rotating order; a mode's cost is the "
        "median, over every turn, of its CPU per request over that of off in the same turn. "
        " On: `ClientTelemetry` / `ReceiverTelemetry` with `metrics=True` alone, or with "
        "`tracing=` alone, an OpenTelemetry SDK `TracerProvider` (batch processor, an exporter "
        "that drops the spans) whose sampler records no span (`ALWAYS_OFF`), one trace in ten "
        "(`ParentBased(TraceIdRatioBased(0.1))`) or every span (`ALWAYS_ON`).  CPU is "
        "`time.process_time()` of the measured process (every thread, the span processor's "
        "among them).  Client: one `Client` per variant in one process, blocks of "
        f"{_block_requests(plan):,} requests at concurrency {plan.client_concurrency}; one span "
        "per request.  Receiver: one `WebhookReceiver` (`MemoryInbox`, no handler) per variant "
        f"mounted on one application, {_block_seconds(plan)} s loads of {connections} "
        f"connections flat out; two spans per delivery; non-2xx answers or errors: {bad}.  "
        "*SDK's spans alone*: what the SDK spends starting and ending that many spans itself "
        "under the same sampler (from the table after; one trace in ten: nine tenths of a "
        "dropped span and a tenth of a recorded one).",
        "",
        *table(
            [
                "figure",
                "telemetry",
                "CPU us/req (turns)",
                "req/s",
                "cost of on (turns)",
                "us/req over off",
                "SDK's spans alone, us",
            ],
            rows,
        ),
        "",
        "The spans of one request apart, in a loop in one process pinned to core "
        f"{CLIENT_CPU} (`_spans_bench.py`): {plan.runs} run(s) of {ROUNDS_PER_RUN} rounds, "
        f"blocks of {plan.spans:,} units, the variants in turn.  *Off*: the hooks with "
        "telemetry off (`ClientTelemetry()`, `ReceiverTelemetry()`).  *Ours*: the same hooks "
        "with tracing on, over off.  *SDK's own*: `tracer.start_span(name, kind=...).end()` as "
        "many times, with the same provider.  A client attempt: `ClientTelemetry.attempt` "
        "entered, answered 200 and left.  A webhook delivery: `ReceiverTelemetry.delivery()` "
        "told the event and the answer, then `dispatch(entry)`; *handlers to run*: the "
        "dispatch span is made current even when dropped, so that the handlers' spans and "
        "requests belong to its trace.  Recorded: `ALWAYS_ON`, a block's time running until "
        "the batch processor has flushed (its thread's CPU counted); dropped: `ALWAYS_OFF`.",
        "",
        *table(
            [
                "unit",
                "spans",
                "off, us",
                "span",
                "ours, us",
                "SDK's own, us",
                "ours beyond the SDK's, us per span (rounds)",
                "goal, us",
            ],
            _span_rows(section, spans),
        ),
    ]
    return section
