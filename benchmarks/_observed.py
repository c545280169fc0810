"""Telemetry as a deployment turns it on, for the "observe" section's variants.

``metrics``: Prometheus metrics only.  The traced modes are OpenTelemetry spans alone (no
metrics), so that their rows show what tracing costs: ``unsampled``, a sampler that records no
span (``ALWAYS_OFF``); ``sampled``, one trace in ten (``ParentBased(TraceIdRatioBased(0.1))``, a
usual production setting); ``traced``, every span recorded.  Recorded spans go through the SDK's
batch processor to an exporter that drops them: what is measured is the cost inside the process,
not a collector's network.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.sdk.trace.sampling import (
    ALWAYS_OFF,
    ALWAYS_ON,
    ParentBased,
    Sampler,
    TraceIdRatioBased,
)

MODES: Final = ("metrics", "unsampled", "sampled", "traced")
SAMPLERS: Final[dict[str, Sampler]] = {
    "unsampled": ALWAYS_OFF,
    "sampled": ParentBased(TraceIdRatioBased(0.1)),
    "traced": ALWAYS_ON,
}


class _Dropped(SpanExporter):
    """Takes every batch and keeps nothing."""

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        return SpanExportResult.SUCCESS


def provider(mode: str, *, queue: int = 2048) -> TracerProvider:
    """A provider sampling as ``mode`` says, its spans batched to an exporter that drops them
    (``queue``: the batch processor's queue, spans beyond it are dropped unexported)."""
    made = TracerProvider(sampler=SAMPLERS[mode])
    made.add_span_processor(BatchSpanProcessor(_Dropped(), max_queue_size=queue))
    return made


def tracing(mode: str) -> TracerProvider | bool:
    return False if mode == "metrics" else provider(mode)


def client_telemetry(mode: str) -> Any:
    from asyncsdk import ClientTelemetry

    return ClientTelemetry(metrics=mode == "metrics", tracing=tracing(mode))


def receiver_telemetry(mode: str) -> Any:
    from webhooks import ReceiverTelemetry

    return ReceiverTelemetry(metrics=mode == "metrics", tracing=tracing(mode))
