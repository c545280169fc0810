"""Section 6's span figures: the spans of one request of ours beside the SDK's own, in one process.

A request's CPU moves by more from one block of load to the next than a span costs, so the price
of our spans is measured apart, here: the hooks the request path calls, in a loop, beside the
OpenTelemetry SDK starting and ending as many spans with the same provider and nothing else.

* ``client attempt``: ``ClientTelemetry.attempt(request, 0)`` entered, answered 200 and left, as
  ``_transport.py`` does per attempt; one span.
* ``webhook delivery``: ``ReceiverTelemetry.delivery()`` told the event and the answer, then
  ``dispatch(entry)`` entered and left with nothing to run under it (``MemoryInbox``, no handler,
  no registry, as the receiver rows of the section); two spans.
* ``webhook delivery, handlers to run``: the same with a handler or a registry (``nested``): the
  dispatch span is made current even when it is not sampled, so that what runs under it belongs
  to its trace.

Each unit is timed with telemetry off (``ClientTelemetry()`` / ``ReceiverTelemetry()``, the hooks
that do nothing), with tracing on, and the SDK alone, under a sampler that records no span
(``ALWAYS_OFF``) and one that records every span (``ALWAYS_ON``, through the batch processor to
an exporter that drops them; a block's time runs until the processor has flushed, and its thread's
CPU is counted).  Ours beyond the SDK, per span: ``(on - off - SDK) / spans``.

The hooks take a private ``Request`` (``asyncsdk._protocol.requests``): the one the transport
hands to ``ClientTelemetry.attempt``, which no public call builds alone.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable
from typing import Any, Final

from opentelemetry.trace import SpanKind, Tracer
from yarl import URL

from asyncsdk import ClientTelemetry, ProcessCompleted
from asyncsdk._protocol.requests import Request
from benchmarks._child import ChildIO
from benchmarks._env import median
from benchmarks._observed import provider
from webhooks import InboxEntry, ReceiverTelemetry

UNITS: Final = {"client attempt": 1, "webhook delivery": 2, "webhook delivery, handlers to run": 2}
"""Each unit the job times, and how many spans it makes."""
SAMPLED: Final = {"dropped": "unsampled", "recorded": "traced"}
"""What happens to the spans, and the ``_observed.py`` mode whose sampler does it."""
BASE: Final = URL("http://127.0.0.1:8080")

Unit = Callable[[Any], None]


def _attempt(telemetry: ClientTelemetry) -> Unit:
    def one(request: Request) -> None:
        with telemetry.attempt(request, 0) as record:
            record.answered(200)

    return one


def _delivery(telemetry: ReceiverTelemetry, *, nested: bool) -> Unit:
    def one(entry: InboxEntry) -> None:
        with telemetry.delivery() as span:
            span.event(entry.event)
            span.answered(200)
        with telemetry.dispatch(entry, nested=nested):
            pass

    return one


def _sdk(tracer: Tracer, unit: str) -> Unit:
    if unit == "client attempt":

        def attempt(_: object) -> None:
            tracer.start_span("GET /v3/process/{process_id}", kind=SpanKind.CLIENT).end()

        return attempt

    def delivery(_: object) -> None:
        tracer.start_span("webhooks.delivery", kind=SpanKind.SERVER).end()
        tracer.start_span("webhooks.dispatch", kind=SpanKind.CONSUMER).end()

    return delivery


def _items(unit: str, count: int, round_number: int) -> list[Any]:
    """Fresh arguments for one block: new URLs and events, as each request brings its own."""
    ids = [f"pr-{round_number}-{number}" for number in range(count)]
    if unit == "client attempt":
        # The route template, as the client's builders name it on the requests they make.
        route = "/v3/process/{process_id}"
        return [
            Request(method="GET", url=BASE / "v3" / "process" / pid, route=route) for pid in ids
        ]
    return [
        InboxEntry(
            id=f"{number}-0",
            event=ProcessCompleted(
                event="process.completed",
                process_id=pid,
                order_id="order-1",
                tool="tool-virtual-staging",
                status="done",
            ),
            raw=b"{}",
            attempts=1,
        )
        for number, pid in enumerate(ids)
    ]


def _timed(run: Unit, items: list[Any], flush: Callable[[], object]) -> float:
    """CPU microseconds per item of ``run`` over ``items``, the span processor's flush included."""
    gc.collect()
    started = time.process_time()
    for item in items:
        run(item)
    flush()
    return (time.process_time() - started) / len(items) * 1e6


async def span_job(io: ChildIO, *, spans: int, rounds: int) -> dict[str, Any]:
    """``{unit: {"spans", "off", "<sampled> ours", "<sampled> sdk": [us per unit per round]}}``,
    each unit timed ``rounds`` times over ``spans`` units, the variants in turn."""
    providers = {kind: provider(mode, queue=2 * spans + 1) for kind, mode in SAMPLED.items()}
    off: dict[str, Unit] = {
        "client attempt": _attempt(ClientTelemetry()),
        "webhook delivery": _delivery(ReceiverTelemetry(), nested=False),
        "webhook delivery, handlers to run": _delivery(ReceiverTelemetry(), nested=True),
    }
    variants: dict[str, dict[str, tuple[Unit, Callable[[], object]]]] = {}
    for unit in UNITS:
        variants[unit] = {"off": (off[unit], lambda: None)}
        for kind, made in providers.items():
            ours: Unit
            if unit == "client attempt":
                ours = _attempt(ClientTelemetry(tracing=made))
            else:
                nested = unit.endswith("handlers to run")
                ours = _delivery(ReceiverTelemetry(tracing=made), nested=nested)
            variants[unit][f"{kind} ours"] = (ours, made.force_flush)
            variants[unit][f"{kind} sdk"] = (_sdk(made.get_tracer("bench"), unit), made.force_flush)
    result: dict[str, Any] = {
        unit: {"spans": UNITS[unit], **{name: [] for name in variants[unit]}} for unit in UNITS
    }
    for unit, runs in variants.items():  # a warm-up of each
        for run, flush in runs.values():
            _timed(run, _items(unit, min(spans, 2_000), -1), flush)
    for number in range(rounds):
        for unit, runs in variants.items():
            names = list(runs)
            shift = number % len(names)
            for name in names[shift:] + names[:shift]:
                run, flush = runs[name]
                result[unit][name].append(_timed(run, _items(unit, spans, number), flush))
    for made in providers.values():
        made.shutdown()
    return result


def beyond_sdk(figures: dict[str, Any], kind: str) -> list[float]:
    """Per round, the microseconds per span ours adds to the SDK's own (``kind``: dropped,
    recorded)."""
    spans = figures["spans"]
    return [
        (on - off - sdk) / spans
        for on, off, sdk in zip(
            figures[f"{kind} ours"], figures["off"], figures[f"{kind} sdk"], strict=True
        )
    ]


def per_span(figures: dict[str, Any], name: str) -> float:
    """The median over rounds of ``name``'s microseconds per span."""
    spans: int = figures["spans"]
    return median(figures[name]) / spans


async def counted_units(io: ChildIO, *, unit: str, variant: str, mode: str, count: int) -> None:
    """``count`` units of ``unit`` (``variant``: off, ours or sdk; ``mode``: a tracing mode of
    ``_observed.py``), warmed up, run when the parent says so and flushed
    (``benchmarks.trace_instructions`` counts their instructions in between)."""
    made = provider(mode, queue=2 * count + 1)
    if variant == "sdk":
        run = _sdk(made.get_tracer("bench"), unit)
    elif unit == "client attempt":
        run = _attempt(ClientTelemetry(tracing=made) if variant == "ours" else ClientTelemetry())
    else:
        telemetry = ReceiverTelemetry(tracing=made) if variant == "ours" else ReceiverTelemetry()
        run = _delivery(telemetry, nested=unit.endswith("handlers to run"))
    _timed(run, _items(unit, min(count, 2_000), -1), made.force_flush)
    items = _items(unit, count, 0)
    io.ready({})
    await io.recv()
    for item in items:
        run(item)
    made.force_flush()
    io.send({"done": count})
    await io.recv()
    made.shutdown()
