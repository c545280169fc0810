"""The receiver's Prometheus metrics and OpenTelemetry spans: what it reports, and when.

Optional: prometheus-client (the ``metrics`` extra) and opentelemetry-api (the ``tracing`` extra)
are imported only when a :class:`ReceiverTelemetry` asks for them; a receiver without one uses
:data:`NO_RECEIVER_TELEMETRY`, whose hooks do nothing.

The counters the receiver keeps anyway (:class:`~webhooks.Metrics`) and its gauges are read when
Prometheus scrapes, by one collector, so the request path pays nothing for them; only handler
durations are observed as they happen.  Spans: one server span per delivery, one consumer span per
entry handed to the handlers, one span per handler run; each carries the event id
(``webhooks.event_id``) and the process id (``asyncsdk.process_id``) of a ``process.completed``
event or the type (``webhooks.event_type``) of another sender's, never the URL, which holds the
token.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from types import TracebackType
from typing import TYPE_CHECKING, Any, Final, Protocol, runtime_checkable

from asyncsdk import PROCESS_ID_ATTRIBUTE, ConfigurationError
from asyncsdk.telemetry import load_registry, load_tracer
from webhooks._contract import InboxEntry, InboxEvent, InboxStats
from webhooks._observability.counters import BOUNDS, Gauges, Metrics

if TYPE_CHECKING:
    from contextvars import Token

    from opentelemetry.context import Context
    from opentelemetry.trace import Span, Tracer
    from prometheus_client import CollectorRegistry

__all__ = [
    "NO_RECEIVER_TELEMETRY",
    "DeliverySpan",
    "ReceiverTelemetry",
    "WaiterCount",
    "bind_receiver_telemetry",
    "describe_event",
    "log_fields",
    "receiver_telemetry",
]

EVENT_ID_ATTRIBUTE: Final = "webhooks.event_id"
EVENT_TYPE_ATTRIBUTE: Final = "webhooks.event_type"


#: The names an operator reads (:meth:`~webhooks._contract.InboxEvent.describe`) that spans
#: carry too, and under which attribute.
_SPAN_NAMES: Final = {"process_id": PROCESS_ID_ATTRIBUTE, "type": EVENT_TYPE_ATTRIBUTE}
#: The names a log record leaves to the message: the rest of the line says them.
_NOT_LOGGED: Final = frozenset(("status", "tool"))


def event_id(event: InboxEvent) -> str:
    """The id of an event in logs and spans: ``process.completed:<process id>:<status>``, or
    ``webhook:<message id>``."""
    return ":".join(event.dedup_key)


def describe_event(event: InboxEvent) -> dict[str, str]:
    """What an operator reads of an event, by name: ``process_id``, ``status`` and ``tool`` of a
    ``process.completed`` event; ``message_id`` and ``type`` of another sender's (the event's
    own ``describe()``)."""
    return event.describe()


def log_fields(event: InboxEvent) -> dict[str, str]:
    """The ``extra`` of a log record about ``event``: its process id (or message id and type)
    and its event id."""
    fields = {name: value for name, value in event.describe().items() if name not in _NOT_LOGGED}
    fields["event_id"] = event_id(event)
    return fields


def span_attributes(event: InboxEvent) -> dict[str, str]:
    """The attributes every span about ``event`` carries: its process id (or its type), and
    its event id."""
    attributes = {
        _SPAN_NAMES[name]: value for name, value in event.describe().items() if name in _SPAN_NAMES
    }
    attributes[EVENT_ID_ATTRIBUTE] = event_id(event)
    return attributes


@runtime_checkable
class WaiterCount(Protocol):
    """A result sink that can say how many coroutines wait on it (every registry can)."""

    @property
    def pending_count(self) -> int: ...


class _Untracked:
    """A delivery, entry or handler nobody records."""

    __slots__ = ()

    def event(self, event: InboxEvent) -> None:
        pass

    def answered(self, status: int) -> None:
        pass

    def __enter__(self) -> _Untracked:
        return self

    def __exit__(self, *exc_info: object) -> None:
        pass


_UNTRACKED: Final = _Untracked()


class _Delivery:
    """The server span of one delivery; its attributes beyond the method only when it records."""

    __slots__ = ("_owner", "_recording", "_span")

    def __init__(self, owner: ReceiverTelemetry, tracer: Tracer) -> None:
        self._owner = owner
        self._span = tracer.start_span(
            "webhooks.delivery", kind=owner.kinds["server"], attributes=_DELIVERY_ATTRIBUTES
        )
        self._recording = self._span.is_recording()

    def event(self, event: InboxEvent) -> None:
        if self._recording:
            self._span.set_attributes(span_attributes(event))

    def answered(self, status: int) -> None:
        if not self._recording:
            return
        self._span.set_attribute("http.response.status_code", status)
        if status >= 500:
            self._span.set_attribute("error.type", str(status))
            self._span.set_status(self._owner.kinds["error"], str(status))

    def __enter__(self) -> _Delivery:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if exc_type is not None and self._recording:
            self._span.set_attribute("error.type", exc_type.__name__)
            self._span.set_status(self._owner.kinds["error"], exc_type.__name__)
        self._span.end()


#: What a delivery's span starts with: all a sampler can know before the body is read.
_DELIVERY_ATTRIBUTES: Final = {"http.request.method": "POST"}


class _Dispatch:
    """The consumer span of one claimed entry.

    Its attributes (process id, event id, entry id, attempt) are set only when it records.  It
    is made the current span (so the spans of the handlers, and of the requests they and
    fetch-back send, are its children) when it records or when something runs under it
    (``nested``): a span its sampler dropped is current too then, so that what runs under it
    belongs to the same trace and a parent-based sampler drops it as well.
    """

    __slots__ = ("_entry", "_nested", "_owner", "_span", "_token", "_tracer")

    def __init__(
        self, owner: ReceiverTelemetry, tracer: Tracer, entry: InboxEntry, nested: bool
    ) -> None:
        self._owner = owner
        self._tracer = tracer
        self._entry = entry
        self._nested = nested
        self._token: Token[Context] | None = None

    def __enter__(self) -> _Dispatch:
        entry = self._entry
        event = entry.event
        self._span = span = self._tracer.start_span(
            "webhooks.dispatch", kind=self._owner.kinds["consumer"]
        )
        recording = span.is_recording()
        if recording:
            span.set_attributes(
                {
                    **span_attributes(event),
                    "webhooks.entry_id": entry.id,
                    "webhooks.attempt": entry.attempts,
                }
            )
        if recording or self._nested:
            self._token = self._owner._attach(span)
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        span = self._span
        if self._token is not None:
            self._owner._detach(self._token)
        if isinstance(exc, Exception) and span.is_recording():
            span.record_exception(exc)
            span.set_status(self._owner.kinds["error"], f"{type(exc).__name__}: {exc}")
        span.end()


class ReceiverTelemetry:
    """Metrics and spans of one receiver: ``WebhookReceiver(telemetry=ReceiverTelemetry(...))``.

    ``metrics``: ``True`` for a new ``prometheus_client.CollectorRegistry`` of its own (at
    :attr:`registry`), or your registry (one receiver per registry; the metrics of a
    :class:`~asyncsdk.ClientTelemetry` may share it).  The default global registry is never used
    unless you pass it.  Metrics: ``webhooks_deliveries_total`` (outcome, reason),
    ``webhooks_ack_latency_seconds``, ``webhooks_handler_duration_seconds`` (handler, outcome),
    ``webhooks_entries_total`` (outcome: processed, failed, retried, dead_lettered, replayed,
    forged, rewritten), the shared inbox read from the store every 2 s
    (``webhooks_inbox_depth``, ``webhooks_inbox_oldest_age_seconds``,
    ``webhooks_inbox_dead_letters``, ``webhooks_inbox_replays_total``), this receiver's own
    ``webhooks_in_flight`` and ``webhooks_oldest_pending_age_seconds`` (of the entries it holds),
    and ``webhooks_registry_waiters``.

    ``tracing``: ``True`` for the global OpenTelemetry tracer provider, or a provider of yours:
    ``webhooks.delivery`` (server), ``webhooks.dispatch`` (consumer) and ``webhooks.handler``
    spans, each with ``webhooks.event_id`` and ``asyncsdk.process_id`` (``webhooks.event_type``
    for another sender's events).
    """

    def __init__(self, *, metrics: object = False, tracing: object = False) -> None:
        self.registry: CollectorRegistry | None = load_registry(metrics)
        self._tracer: Tracer | None = load_tracer(tracing, "webhooks")
        self.kinds: dict[str, Any] = {}
        self._context: Any = None
        self._with_span: Any = None
        self._handler_seconds: Any = None
        self._bound = False
        if self._tracer is not None:
            from opentelemetry import context, trace  # there: the tracer came from them

            self.kinds = {
                "server": trace.SpanKind.SERVER,
                "consumer": trace.SpanKind.CONSUMER,
                "error": trace.StatusCode.ERROR,
            }
            self._context = context
            self._with_span = trace.set_span_in_context

    def __repr__(self) -> str:
        return (
            f"<ReceiverTelemetry metrics={self.registry is not None} "
            f"tracing={self._tracer is not None}>"
        )

    def _attach(self, span: Span) -> Token[Context]:
        """Make ``span`` the current span (until :meth:`_detach` with the token returned)."""
        token: Token[Context] = self._context.attach(self._with_span(span))
        return token

    def _detach(self, token: Token[Context]) -> None:
        self._context.detach(token)

    def bind(self, metrics: Metrics, gauges: Gauges) -> None:
        """Register this receiver's collector and handler histogram (once, by the receiver)."""
        if self._bound:
            raise ConfigurationError(
                "this ReceiverTelemetry serves another receiver already; build one per receiver"
            )
        self._bound = True
        if self.registry is None:
            return
        from prometheus_client import Histogram

        from webhooks._observability.exposition import ReceiverCollector

        try:
            self.registry.register(ReceiverCollector(metrics, gauges))
            self._handler_seconds = Histogram(
                "webhooks_handler_duration_seconds",
                "Seconds per handler run, by handler and outcome (ok, error, timeout)",
                ["handler", "outcome"],
                buckets=(*BOUNDS, 30.0, 60.0),
                registry=self.registry,
            )
        except ValueError as exc:
            raise ConfigurationError(
                f"the registry holds these metrics already ({exc}): give each receiver a "
                "CollectorRegistry of its own (metrics=True makes one)"
            ) from None

    def delivery(self) -> DeliverySpan:
        """The span of one delivery, from the first byte to the answer."""
        if self._tracer is None:
            return _UNTRACKED
        return _Delivery(self, self._tracer)

    def dispatch(self, entry: InboxEntry, *, nested: bool) -> AbstractContextManager[object]:
        """The span of one claimed entry; current while it runs when it records or when
        something runs under it (``nested``: handlers, a result sink, fetch-back), so that
        their spans are its children."""
        if self._tracer is None:
            return _UNTRACKED
        return _Dispatch(self, self._tracer, entry, nested)

    def handler(self, name: str, event: InboxEvent) -> AbstractContextManager[object]:
        """One handler run: its span and its duration."""
        if self._tracer is None and self._handler_seconds is None:
            return _UNTRACKED
        return self._handler_run(name, event)

    @contextmanager
    def _handler_run(self, name: str, event: InboxEvent) -> Iterator[None]:
        span: Span | None = None
        if self._tracer is not None:
            span = self._tracer.start_span(
                "webhooks.handler", attributes={"webhooks.handler": name}
            )
            if span.is_recording():
                span.set_attributes(span_attributes(event))
        started = time.perf_counter()
        outcome = "error"
        try:
            yield
            outcome = "ok"
        except TimeoutError:
            outcome = "timeout"
            raise
        except BaseException as exc:
            if span is not None:
                span.set_attribute("error.type", type(exc).__name__)
            raise
        finally:
            if self._handler_seconds is not None:
                self._handler_seconds.labels(name, outcome).observe(time.perf_counter() - started)
            if span is not None:
                if outcome != "ok":
                    span.set_status(self.kinds["error"], outcome)
                    if outcome == "timeout":
                        span.set_attribute("error.type", "timeout")
                span.end()


#: The span of one delivery, or nothing when tracing is off.
DeliverySpan = _Delivery | _Untracked

#: The telemetry of a receiver that asked for none: every hook does nothing.
NO_RECEIVER_TELEMETRY: Final = ReceiverTelemetry()


def receiver_telemetry(
    telemetry: object, *, metrics_route: bool, metrics_token: object
) -> ReceiverTelemetry | None:
    """The receiver's checked ``telemetry=``; with ``metrics_route``, one that has metrics."""
    if telemetry is not None and not isinstance(telemetry, ReceiverTelemetry):
        raise ConfigurationError("telemetry must be a ReceiverTelemetry(metrics=..., tracing=...)")
    if metrics_token is not None and (
        not isinstance(metrics_token, str) or len(metrics_token) < 16
    ):
        raise ConfigurationError(
            "metrics_token must be a string of at least 16 characters, "
            "e.g. secrets.token_urlsafe(32)"
        )
    if not metrics_route:
        return telemetry
    if metrics_token is None:
        raise ConfigurationError(
            "metrics_route=True needs metrics_token=... (scrapers send it as 'Authorization: "
            "Bearer <token>'); or serve telemetry.registry on a port of its own with "
            "webhooks.metrics_app(registry)"
        )
    if telemetry is None:
        return ReceiverTelemetry(metrics=True)
    if telemetry.registry is None:
        raise ConfigurationError(
            "metrics_route=True serves the receiver's Prometheus metrics: pass "
            "telemetry=ReceiverTelemetry(metrics=True)"
        )
    return telemetry


def bind_receiver_telemetry(
    telemetry: ReceiverTelemetry,
    metrics: Metrics,
    *,
    inbox: Callable[[], InboxStats | None],
    inbox_full: bool,
    in_flight: Callable[[], int],
    oldest_received_at: Callable[[], float | None],
    registry: object,
) -> None:
    """Bind ``telemetry`` to one receiver: its counters, and the gauges read at scrape time
    (registry waiters when ``registry`` can count them)."""
    sink = registry if isinstance(registry, WaiterCount) else None
    waiters = None if sink is None else lambda: sink.pending_count
    telemetry.bind(metrics, Gauges(inbox, inbox_full, in_flight, oldest_received_at, waiters))
