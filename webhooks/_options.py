"""A receiver's options, declared once: :class:`ReceiverOptions` (their names, types and
meaning, which signatures and the reference show), :data:`DEFAULTS`, and
:func:`receiver_options`, which checks what a caller gave and fills in the rest."""

from __future__ import annotations

import difflib
from typing import Any, Final, TypedDict, cast

from asyncsdk import ConfigurationError
from webhooks._checks import require_count, require_seconds
from webhooks._contract import ProcessClient, ResultSink
from webhooks._intake import ProcessFilter
from webhooks._observability.telemetry import ReceiverTelemetry

__all__ = ["DEFAULTS", "SERVICE_ONLY", "ReceiverOptions", "receiver_options"]


class ReceiverOptions(TypedDict, total=False):
    """The keyword options of :class:`~webhooks.WebhookReceiver` and
    :class:`~webhooks.EventReceiver` (and of their ``from_*`` constructors), beside ``inbox``
    and ``verifier``; each has the default :data:`DEFAULTS` gives it."""

    client: ProcessClient | None
    """Fetch-back (:class:`~webhooks.WebhookReceiver` only): every delivery is checked with
    ``client.orders.get`` and confirmed with ``client.processes.get`` before the registry and
    handlers see it, and they get the API's answer."""
    registry: ResultSink | None
    """Told about each event before handlers (:class:`~webhooks.WebhookReceiver` only)."""
    process_filter: ProcessFilter | None
    """An async predicate dropping unknown process ids (:class:`~webhooks.WebhookReceiver`
    only; e.g. :class:`~webhooks.KnownProcessFilter`)."""
    fetch_timeout: float
    """Seconds a fetch-back call may take (30)."""
    not_finished_delay: float
    """Seconds before an event the API still calls unfinished is asked about again (15)."""
    max_body: int
    """Bytes per request, 413 past it (256 KiB)."""
    read_timeout: float
    """Seconds to read a body, 408 past it (4)."""
    put_timeout: float
    """Seconds the store may take to keep a delivery, 503 past it (4).  With ``read_timeout``,
    under 10: the service wants a 2xx within 10 seconds."""
    workers: int
    """Entries handled at once (8)."""
    handler_timeout: float
    """Seconds per handler call (60)."""
    max_attempts: int
    """Hand-outs of an entry before it is dead-lettered (5)."""
    retry_base: float
    """Seconds before the first retry, doubling each time (1)."""
    retry_cap: float
    """The longest wait between retries, in seconds (300)."""
    queue_limit: int
    """Unfinished events in the shared inbox (every process's) before deliveries are answered
    503 (10,000)."""
    drain_timeout: float
    """Seconds running handlers get to finish when the receiver stops (10)."""
    retry_after: int
    """The ``Retry-After`` of 503 answers, in seconds (5)."""
    poll_interval: float
    """Seconds between looks at an idle inbox (1)."""
    metrics_route: bool
    """Serve the metrics at ``GET <prefix>metrics`` to scrapers sending ``Authorization: Bearer
    <metrics_token>`` (off)."""
    metrics_token: str | None
    """The scrapers' token, required with ``metrics_route``."""
    health_routes: bool
    """Serve ``GET <prefix>ready`` and ``GET <prefix>live`` for an orchestrator's probes
    (off)."""
    telemetry: ReceiverTelemetry | None
    """Prometheus metrics and OpenTelemetry spans (:class:`~webhooks.ReceiverTelemetry`;
    none)."""
    close_inbox: bool
    """Close the inbox when the receiver stops (on)."""
    consumer: str | None
    """This node's name among the inbox's consumers (a fresh one by default)."""


DEFAULTS: Final[ReceiverOptions] = {
    "client": None,
    "registry": None,
    "process_filter": None,
    "fetch_timeout": 30.0,
    "not_finished_delay": 15.0,
    "max_body": 256 * 1024,
    "read_timeout": 4.0,
    "put_timeout": 4.0,
    "workers": 8,
    "handler_timeout": 60.0,
    "max_attempts": 5,
    "retry_base": 1.0,
    "retry_cap": 300.0,
    "queue_limit": 10_000,
    "drain_timeout": 10.0,
    "retry_after": 5,
    "poll_interval": 1.0,
    "metrics_route": False,
    "metrics_token": None,
    "health_routes": False,
    "telemetry": None,
    "close_inbox": True,
    "consumer": None,
}
"""Each option's value when it is not given."""

SERVICE_ONLY: Final = (
    "client",
    "registry",
    "process_filter",
    "fetch_timeout",
    "not_finished_delay",
)
"""The options only the service's ``process.completed`` events have."""

_COUNTS: Final = ("max_body", "workers", "max_attempts", "queue_limit", "retry_after")
_SECONDS: Final = (
    "read_timeout",
    "put_timeout",
    "handler_timeout",
    "retry_base",
    "retry_cap",
    "poll_interval",
    "fetch_timeout",
    "not_finished_delay",
)


def receiver_options(owner: str, given: dict[str, Any]) -> ReceiverOptions:
    """``given`` over :data:`DEFAULTS`, or :class:`~asyncsdk.ConfigurationError` naming the
    first option that ``owner`` (the public class) does not take or that is wrong."""
    for name in given:
        if name not in DEFAULTS:
            close = difflib.get_close_matches(name, DEFAULTS, n=1)
            hint = f"; did you mean {close[0]}=?" if close else ""
            raise ConfigurationError(
                f"{owner} takes no option {name}={hint} (its options: webhooks.ReceiverOptions)"
            )
    options: dict[str, Any] = {**DEFAULTS, **given}
    for name in _COUNTS:
        require_count(name, options[name], minimum=1)
    for name in _SECONDS:
        require_seconds(name, options[name], zero_ok=False)
    require_seconds("drain_timeout", options["drain_timeout"], zero_ok=True)
    if options["read_timeout"] + options["put_timeout"] >= 10:
        raise ConfigurationError(
            "read_timeout + put_timeout must stay under 10 s: the service wants a 2xx "
            "within 10 seconds"
        )
    return cast(ReceiverOptions, options)  # every key of ReceiverOptions, checked
