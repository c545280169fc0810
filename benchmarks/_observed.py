"""Telemetry as a deployment turns it on, for the "observe" section's variants.

``metrics``: Prometheus metrics only.  ``traced``: metrics, and every span recorded by the
OpenTelemetry SDK through its batch processor.  ``sampled``: metrics, and one trace in ten
recorded (``ParentBased(TraceIdRatioBased(0.1))``, a usual production setting).  Spans go to an
exporter that drops them: what is measured is the cost inside the process, not a collector's
network.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.sdk.trace.sampling import ParentBased, TraceIdRatioBased

MODES = ("metrics", "traced", "sampled")


class _Dropped(SpanExporter):
    """Takes every batch and keeps nothing."""

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        return SpanExportResult.SUCCESS


def tracing(mode: str) -> TracerProvider | bool:
    if mode == "metrics":
        return False
    sampler = ParentBased(TraceIdRatioBased(0.1)) if mode == "sampled" else None
    provider = TracerProvider(sampler=sampler)
    provider.add_span_processor(BatchSpanProcessor(_Dropped()))
    return provider


def client_telemetry(mode: str) -> Any:
    from asyncsdk import ClientTelemetry

    return ClientTelemetry(metrics=True, tracing=tracing(mode))


def receiver_telemetry(mode: str) -> Any:
    from webhooks import ReceiverTelemetry

    return ReceiverTelemetry(metrics=True, tracing=tracing(mode))
