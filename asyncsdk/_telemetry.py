"""The client's metrics and spans: what each request attempt, retry and wait for a slot reports.

Both are optional and off unless a :class:`ClientTelemetry` asks for them: prometheus-client (the
``metrics`` extra) and opentelemetry-api (the ``tracing`` extra) are imported only then.  A client
without telemetry uses :data:`NO_TELEMETRY`, whose hooks do nothing.

Requests are labelled by their route template (``/v3/process/{process_id}``), never by the raw
path with its ids, so the number of time series stays bounded.  Spans follow OpenTelemetry's HTTP
client conventions; ``url.full`` carries no user information, and the API key, a header, is never
an attribute.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from types import TracebackType
from typing import TYPE_CHECKING, Any, Final
from urllib.parse import unquote

from yarl import URL

from asyncsdk._errors import ConfigurationError
from asyncsdk._protocol.requests import Request

if TYPE_CHECKING:
    from opentelemetry.trace import Span, Tracer
    from prometheus_client import CollectorRegistry

__all__ = [
    "NO_TELEMETRY",
    "PROCESS_ID_ATTRIBUTE",
    "ClientTelemetry",
    "client_telemetry",
    "load_registry",
    "load_tracer",
    "log_fields",
    "route_of",
]

#: The span attribute that names the process a span is about, on client and receiver spans alike.
PROCESS_ID_ATTRIBUTE: Final = "asyncsdk.process_id"

#: A path segment after one of these is an id, shown in the route as the named parameter.
_ID_AFTER: Final = {
    "project": "project_id",
    "order": "order_id",
    "process": "process_id",
    "tools": "tool_slug",
}
#: Segments of the service's paths that are words, never ids (``/v1/order/image``).
_WORDS: Final = frozenset(
    {"api", "append", "cathub", "image", "order", "process", "project", "tools", "v1", "v3"}
)


def route_of(url: URL) -> tuple[str, dict[str, str]]:
    """The route template of a request URL's path and the ids it holds.

    ``/v3/process/p-1`` -> ``("/v3/process/{process_id}", {"process_id": "p-1"})``.  The path
    is split as sent, before its percent-escapes are decoded, so that an id holding ``/`` (sent
    as ``%2F``) stays one id and the templates stay as few as the routes.
    """
    raw = url.raw_path
    segments = raw.split("/")
    ids: dict[str, str] = {}
    previous = ""
    for index, segment in enumerate(segments):
        name = _ID_AFTER.get(previous)
        previous = segment
        if name is not None and segment and segment not in _WORDS:
            ids[name] = unquote(segment) if "%" in segment else segment
            segments[index] = "{" + name + "}"
    return ("/".join(segments) if ids else raw), ids


def _ids_at(route: str, url: URL) -> dict[str, str]:
    """The ids of ``url``'s path at the ``{name}`` segments of ``route``, its template (the two
    aligned from their ends): an id is whatever stands there, a word of the paths included."""
    ids: dict[str, str] = {}
    pairs = zip(reversed(route.split("/")), reversed(url.raw_path.split("/")), strict=False)
    for template, segment in pairs:
        if template.startswith("{") and template.endswith("}"):
            ids[template[1:-1]] = unquote(segment) if "%" in segment else segment
    return ids


def _route(request: Request) -> str:
    """The route template of ``request``: as its builder named it, else read off its path."""
    return request.route if request.route is not None else route_of(request.url)[0]


def log_fields(request: Request) -> dict[str, str]:
    """The ``extra`` of a log record about ``request``: the process id its path names, if any."""
    ids = _ids_at(_route(request), request.url)
    return {"process_id": ids["process_id"]} if "process_id" in ids else {}


def _missing(extra: str, package: str) -> ConfigurationError:
    return ConfigurationError(
        f"{package} is not installed: pip install 'asyncsdk[{extra}]' to turn {extra} on"
    )


def load_registry(metrics: object) -> CollectorRegistry | None:
    """The registry ``metrics=`` asks for: ``True`` a new one, a registry itself, ``False`` none."""
    if metrics is False:
        return None
    try:
        from prometheus_client import CollectorRegistry
    except ImportError:
        raise _missing("metrics", "prometheus-client") from None
    if metrics is True:
        return CollectorRegistry(auto_describe=True)
    if isinstance(metrics, CollectorRegistry):
        return metrics
    raise ConfigurationError(
        "metrics must be True, False or a prometheus_client.CollectorRegistry, "
        f"not {type(metrics).__name__}"
    )


def load_tracer(tracing: object, name: str) -> Tracer | None:
    """The tracer ``tracing=`` asks for: ``True`` the global provider's, a provider's, or none.

    ``name`` is the tracer's name, the instrumentation scope its spans are reported under
    (``"asyncsdk"`` for the client, ``"webhooks"`` for the receiver).
    """
    if tracing is False:
        return None
    try:
        from opentelemetry import trace
    except ImportError:
        raise _missing("tracing", "opentelemetry-api") from None
    if tracing is True:
        return trace.get_tracer(name)
    if isinstance(tracing, trace.TracerProvider):
        return tracing.get_tracer(name)
    raise ConfigurationError(
        "tracing must be True (the global tracer provider), False or an "
        f"opentelemetry.trace.TracerProvider, not {type(tracing).__name__}"
    )


class _Untracked:
    """An attempt nobody records."""

    __slots__ = ()

    def answered(self, status: int) -> None:
        pass

    def __enter__(self) -> _Untracked:
        return self

    def __exit__(self, *exc_info: object) -> None:
        pass


_UNTRACKED: Final = _Untracked()


class _Attempt:
    """One request attempt being recorded: its span, its start, and its answer once known.

    The span is started with the attributes a sampler may look at, the method and the route
    template, both at hand already; the rest (server address and port, ``url.full``, the process
    id, the resend count, the answer) is built only when the span records, and set in one call
    when the attempt ends.  A span its sampler drops costs the OpenTelemetry SDK's own price and
    little more: the ``observe`` goals about spans in ``benchmarks/RESULTS.md``.
    """

    __slots__ = (
        "_attempt",
        "_method",
        "_owner",
        "_recording",
        "_route",
        "_span",
        "_started",
        "_status",
        "_url",
    )

    def __init__(self, owner: ClientTelemetry, request: Request, attempt: int) -> None:
        self._owner = owner
        self._method = method = request.method
        self._url = request.url
        self._attempt = attempt
        self._route = _route(request)  # its ids are read at its parameters if a span records
        self._status = 0
        self._span: Span | None = None
        self._recording = False
        if owner.tracer is not None:
            span = owner.tracer.start_span(
                f"{method} {self._route}",
                kind=owner.client_kind,
                attributes={"http.request.method": method, "url.template": self._route},
            )
            self._span = span
            self._recording = span.is_recording()
        self._started = time.perf_counter() if owner.requests is not None else 0.0

    def answered(self, status: int) -> None:
        """The server answered ``status`` (every status, retried or not)."""
        self._status = status

    def __enter__(self) -> _Attempt:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        owner = self._owner
        if owner.requests is not None:
            status = str(self._status) if self._status else "error"
            count, duration = owner.series(self._method, self._route, status)
            count.inc()
            duration.observe(time.perf_counter() - self._started)
        span = self._span
        if span is None:
            return
        if self._recording:
            attributes = self._recorded_attributes()
            error = exc_type.__name__ if exc_type is not None else None
            if error is None and self._status >= 400:
                error = str(self._status)
            if error is not None:
                attributes["error.type"] = error
                span.set_status(owner.error_status, error)
            span.set_attributes(attributes)
        span.end()

    def _recorded_attributes(self) -> dict[str, Any]:
        """The attributes only a recorded span gets, built when it ends."""
        url = self._url
        if url.raw_user is not None or url.raw_password is not None:
            url = url.with_user(None)
        attributes: dict[str, Any] = {"server.address": url.host or "", "url.full": str(url)}
        if url.port is not None:
            attributes["server.port"] = url.port
        if self._attempt:
            attributes["http.request.resend_count"] = self._attempt
        ids = _ids_at(self._route, url)
        if "process_id" in ids:
            attributes[PROCESS_ID_ATTRIBUTE] = ids["process_id"]
        if self._status:
            attributes["http.response.status_code"] = self._status
        return attributes


class ClientTelemetry:
    """Metrics and spans of one or more clients: ``Client(telemetry=ClientTelemetry(...))``.

    ``metrics``: ``True`` for a new ``prometheus_client.CollectorRegistry`` of its own (at
    :attr:`registry`), or your registry; the default global registry is never used unless you pass
    it.  Metrics: ``asyncsdk_client_requests_total`` (method, endpoint, status),
    ``asyncsdk_client_request_duration_seconds`` (method, endpoint),
    ``asyncsdk_client_retries_total`` (method, endpoint, reason) and
    ``asyncsdk_client_generation_wait_seconds``.  One instance may serve several clients.

    ``tracing``: ``True`` for the global OpenTelemetry tracer provider, or a provider of yours: a
    client span per request attempt (``POST /v3/process``), with ``asyncsdk.process_id`` where
    the request is about one process, and a ``asyncsdk.run`` span around each
    :meth:`~asyncsdk.Client.run`.

    Needs the ``metrics`` / ``tracing`` extra for what it turns on.
    """

    def __init__(self, *, metrics: object = False, tracing: object = False) -> None:
        self.registry = load_registry(metrics)
        self.tracer = load_tracer(tracing, "asyncsdk")
        self.requests: Any = None
        self.durations: Any = None
        self.retries: Any = None
        self.generation_wait: Any = None
        self._series: dict[tuple[str, str, str], tuple[Any, Any]] = {}
        if self.registry is not None:
            from prometheus_client import Counter, Histogram

            where = ("method", "endpoint")
            self.requests = Counter(
                "asyncsdk_client_requests",
                "Request attempts by route template and answer status ('error': no answer)",
                [*where, "status"],
                registry=self.registry,
            )
            self.durations = Histogram(
                "asyncsdk_client_request_duration_seconds",
                "Seconds per request attempt, answer read",
                where,
                registry=self.registry,
            )
            self.retries = Counter(
                "asyncsdk_client_retries",
                "Retries by route template and what caused them (a status or an error type)",
                [*where, "reason"],
                registry=self.registry,
            )
            self.generation_wait = Histogram(
                "asyncsdk_client_generation_wait_seconds",
                "Seconds a process creation waited for a slot of the GenerationLimit",
                registry=self.registry,
            )
        if self.tracer is not None:
            from opentelemetry.trace import SpanKind, StatusCode

            self.client_kind: Any = SpanKind.CLIENT
            self.error_status: Any = StatusCode.ERROR

    def series(self, method: str, route: str, status: str) -> tuple[Any, Any]:
        """The request counter and duration histogram of one (method, route, status).

        Kept per label values: prometheus-client's ``labels()`` costs about 1.7 us a call, two
        per request, against 0.1 us for this lookup; paid for by the benchmark line ``observe |
        client get: CPU per request, metrics on: costs <= 5% over off`` in
        ``benchmarks/RESULTS.md``.  Routes are
        templates and statuses few, so the table stays small.
        """
        key = (method, route, status)
        found = self._series.get(key)
        if found is None:
            found = self._series[key] = (
                self.requests.labels(method, route, status),
                self.durations.labels(method, route),
            )
        return found

    def __repr__(self) -> str:
        return (
            f"<ClientTelemetry metrics={self.registry is not None} "
            f"tracing={self.tracer is not None}>"
        )

    def attempt(self, request: Request, attempt: int) -> _Attempt | _Untracked:
        """Record one attempt of ``request`` (``attempt`` 0 is the first send)."""
        if self.registry is None and self.tracer is None:
            return _UNTRACKED
        return _Attempt(self, request, attempt)

    def retried(self, request: Request, reason: str) -> None:
        """``request`` is sent again because of ``reason`` (a status or an error type)."""
        if self.retries is not None:
            self.retries.labels(request.method, _route(request), reason).inc()

    @contextmanager
    def generation_slot(self) -> Iterator[None]:
        """Time the wait for a slot of the generation limit."""
        started = time.perf_counter()
        yield
        if self.generation_wait is not None:
            self.generation_wait.observe(time.perf_counter() - started)

    @contextmanager
    def run(self, tool: str) -> Iterator[_Run]:
        """The span of one :meth:`~asyncsdk.Client.run`, current while it lasts, so
        the upload, the creation and the polls are its children."""
        if self.tracer is None:
            yield _Run(None)
            return
        attributes = {"asyncsdk.tool": tool}
        with self.tracer.start_as_current_span("asyncsdk.run", attributes=attributes) as span:
            yield _Run(span)


class _Run:
    """The span of one run, told how it ended."""

    __slots__ = ("_span",)

    def __init__(self, span: Span | None) -> None:
        self._span = span

    def completed(self, process_id: str, status: str) -> None:
        if self._span is not None:
            self._span.set_attribute(PROCESS_ID_ATTRIBUTE, process_id)
            self._span.set_attribute("asyncsdk.process_status", status)
            self._span.add_event("process.completed", {PROCESS_ID_ATTRIBUTE: process_id})


#: The telemetry of a client that asked for none: every hook does nothing.
NO_TELEMETRY: Final = ClientTelemetry()


def client_telemetry(value: object) -> ClientTelemetry:
    """``Client(telemetry=...)``: a ``ClientTelemetry``, or ``None`` for none."""
    if value is None:
        return NO_TELEMETRY
    if not isinstance(value, ClientTelemetry):
        raise ConfigurationError("telemetry must be a ClientTelemetry(metrics=..., tracing=...)")
    return value
