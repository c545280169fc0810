"""Prometheus' view of a receiver: the collector read at scrape time, and the metrics route.

:class:`ReceiverCollector` turns the counters a receiver keeps anyway (:class:`~webhooks.Metrics`)
and its gauges into metric families when Prometheus scrapes, so the request path pays nothing for
them.  :func:`metrics_app` serves a registry on a port of its own; the receiver's own
``metrics_route`` uses the same view, behind its token.  prometheus-client is imported only here,
and only once metrics were asked for.
"""

from __future__ import annotations

import hmac
import time
from collections.abc import Awaitable, Callable, Iterator
from typing import TYPE_CHECKING

from aiohttp import hdrs, web

from webhooks._observability.counters import BOUNDS, Gauges, Metrics

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry
    from prometheus_client.metrics_core import Metric

__all__ = ["ReceiverCollector", "metrics_app", "metrics_view"]


class ReceiverCollector:
    """Reads a receiver's counters and gauges when Prometheus scrapes."""

    def __init__(self, metrics: Metrics, gauges: Gauges) -> None:
        self._metrics = metrics
        self._gauges = gauges

    def describe(self) -> list[Metric]:
        return list(self.collect())

    def collect(self) -> Iterator[Metric]:
        from prometheus_client.core import (
            CounterMetricFamily,
            GaugeMetricFamily,
            HistogramMetricFamily,
        )

        m, g = self._metrics, self._gauges
        deliveries = CounterMetricFamily(
            "webhooks_deliveries",
            "Deliveries by outcome; reason: why one was refused, ignored or answered 503",
            labels=["outcome", "reason"],
        )
        deliveries.add_metric(["accepted", ""], m.accepted)
        deliveries.add_metric(["duplicate", ""], m.duplicate)
        for outcome, counts in (
            ("rejected", m.rejected),
            ("unavailable", m.unavailable),
            ("ignored", m.ignored),
        ):
            for reason, count in sorted(counts.items()):
                deliveries.add_metric([outcome, reason], count)
        yield deliveries

        latency = m.ack_latency
        buckets: list[tuple[str, float]] = []
        seen = 0
        for bound, count in zip(BOUNDS, latency.counts, strict=False):
            seen += count
            buckets.append((repr(bound), seen))
        buckets.append(("+Inf", latency.count))
        yield HistogramMetricFamily(
            "webhooks_ack_latency_seconds",
            "Seconds from the start of a delivery to its 2xx answer",
            buckets=buckets,
            sum_value=latency.total,
        )

        entries = CounterMetricFamily(
            "webhooks_entries", "Stored events by what became of them", labels=["outcome"]
        )
        for outcome, count in (
            ("processed", m.processed),
            ("failed", m.failed),
            ("retried", m.retried),
            ("dead_lettered", m.dead_lettered),
            ("replayed", m.replayed),
            ("forged", m.forged),
            ("rewritten", m.rewritten),
        ):
            entries.add_metric([outcome], count)
        yield entries

        yield from _inbox_families(g)

        oldest = g.oldest_received_at()
        age = 0.0 if oldest is None else max(0.0, time.time() - oldest)
        gauges: list[tuple[str, str, float]] = [
            (
                "webhooks_in_flight",
                "Entries this node holds: queued, running, being acked"
                " (the shared inbox: webhooks_inbox_depth)",
                g.in_flight(),
            ),
            (
                "webhooks_oldest_pending_age_seconds",
                "Age of the oldest entry this node holds"
                " (the shared inbox: webhooks_inbox_oldest_age_seconds)",
                age,
            ),
        ]
        if g.waiters is not None:
            waiting = g.waiters()
            gauges.append(
                ("webhooks_registry_waiters", "Coroutines awaiting the registry", waiting)
            )
        for name, documentation, value in gauges:
            yield GaugeMetricFamily(name, documentation, value=value)


def _inbox_families(g: Gauges) -> Iterator[Metric]:
    """The shared inbox's figures, as the store last gave them; none when too old."""
    from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

    stats = g.inbox()
    if stats is None:
        return
    yield GaugeMetricFamily(
        "webhooks_inbox_depth",
        "Unfinished entries in the whole shared inbox, every node's (read from the store)",
        value=stats.depth,
    )
    if not g.inbox_full:
        return
    yield GaugeMetricFamily(
        "webhooks_inbox_oldest_age_seconds",
        "Age of the oldest unfinished entry in the shared inbox (read from the store)",
        value=stats.oldest_age or 0.0,
    )
    yield GaugeMetricFamily(
        "webhooks_inbox_dead_letters",
        "Dead letters in the shared inbox (read from the store)",
        value=stats.dead,
    )
    yield CounterMetricFamily(
        "webhooks_inbox_replays",
        "Dead letters replayed on the shared inbox, by any node or the command line"
        " (read from the store)",
        value=stats.replayed,
    )


def _authorized(request: web.Request, token: str | None) -> bool:
    if token is None:
        return True
    given = request.headers.get(hdrs.AUTHORIZATION, "")
    scheme, _, credentials = given.partition(" ")
    return scheme.lower() == "bearer" and hmac.compare_digest(
        credentials.strip().encode("utf-8", "surrogateescape"), token.encode()
    )


def metrics_view(
    registry: CollectorRegistry, token: str | None
) -> Callable[[web.Request], Awaitable[web.Response]]:
    """The ``GET`` handler that serves ``registry`` in Prometheus' text format."""
    from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

    async def view(request: web.Request) -> web.Response:
        if not _authorized(request, token):
            return web.json_response(
                {"error": "send the metrics token as 'Authorization: Bearer <token>'"},
                status=401,
                headers={hdrs.WWW_AUTHENTICATE: 'Bearer realm="metrics"'},
            )
        return web.Response(
            body=generate_latest(registry), headers={hdrs.CONTENT_TYPE: CONTENT_TYPE_LATEST}
        )

    return view


def metrics_app(registry: CollectorRegistry, *, token: str | None = None) -> web.Application:
    """An application serving ``registry`` at ``GET /metrics``, to run on a port of its own.

    ``token``: when given, scrapers must send ``Authorization: Bearer <token>``.  Without one,
    bind the port to an address only your scrapers reach (``127.0.0.1`` or a private network).
    """
    app = web.Application()
    app.router.add_get("/metrics", metrics_view(registry, token))
    return app
