"""Counters and the ack-latency histogram of one receiver (in process, no dependencies)."""

from __future__ import annotations

import bisect
from collections import Counter
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final

import attrs

if TYPE_CHECKING:
    from webhooks._contract import InboxStats

__all__ = ["BOUNDS", "Gauges", "LatencyHistogram", "Metrics"]

# Upper bounds in seconds; the last bucket is open.  Fine below 50 ms, where acks should be.
BOUNDS: Final = (
    0.0005,
    0.001,
    0.002,
    0.005,
    0.01,
    0.02,
    0.05,
    0.1,
    0.2,
    0.5,
    1.0,
    2.0,
    5.0,
    10.0,
)


@attrs.define
class LatencyHistogram:
    """Fixed buckets; quantiles are the upper bound of the bucket holding them."""

    counts: list[int] = attrs.field(factory=lambda: [0] * (len(BOUNDS) + 1))
    count: int = 0
    total: float = 0.0
    max: float = 0.0

    def observe(self, seconds: float) -> None:
        """Count one latency of ``seconds``."""
        self.counts[bisect.bisect_left(BOUNDS, seconds)] += 1
        self.count += 1
        self.total += seconds
        self.max = max(self.max, seconds)

    def quantile(self, q: float) -> float:
        """Upper bound (seconds) of the bucket holding quantile ``q``; ``max`` past 10 s."""
        if not self.count:
            return 0.0
        rank = q * self.count
        seen = 0
        for index, n in enumerate(self.counts):
            seen += n
            if seen >= rank and n:
                return BOUNDS[index] if index < len(BOUNDS) else self.max
        return self.max  # pragma: no cover - the loop always reaches count

    def snapshot(self) -> dict[str, Any]:
        """Count, mean, p50, p99, max and the buckets, as a JSON-ready dict."""
        return {
            "count": self.count,
            "mean": self.total / self.count if self.count else 0.0,
            "p50": self.quantile(0.5),
            "p99": self.quantile(0.99),
            "max": self.max,
            "buckets": {
                **{f"le_{bound}": n for bound, n in zip(BOUNDS, self.counts, strict=False)},
                "inf": self.counts[-1],
            },
        }


@attrs.define
class Metrics:
    """What a receiver has seen and done since it was built.

    Request side: ``received`` (every POST), ``accepted`` (new events stored), ``duplicate``,
    ``rejected`` (4xx, by reason code), ``unavailable`` (503, by reason), ``ignored`` (2xx without
    storing: unknown event types, unknown processes).  Worker side: ``processed`` (handlers done,
    entry acked), ``failed`` (failed attempts), ``retried``, ``dead_lettered``, ``replayed``,
    ``forged`` (fetch-back found no such process), ``rewritten`` (fetch-back disagreed with the
    delivery).  ``ack_latency``: time from the start of a request to its 2xx answer.
    """

    received: int = 0
    accepted: int = 0
    duplicate: int = 0
    rejected: Counter[str] = attrs.field(factory=Counter)
    unavailable: Counter[str] = attrs.field(factory=Counter)
    ignored: Counter[str] = attrs.field(factory=Counter)
    processed: int = 0
    failed: int = 0
    retried: int = 0
    dead_lettered: int = 0
    replayed: int = 0
    forged: int = 0
    rewritten: int = 0
    ack_latency: LatencyHistogram = attrs.field(factory=LatencyHistogram)

    def snapshot(self) -> dict[str, Any]:
        """A JSON-ready copy."""
        return {
            "received": self.received,
            "accepted": self.accepted,
            "duplicate": self.duplicate,
            "rejected": dict(self.rejected),
            "unavailable": dict(self.unavailable),
            "ignored": dict(self.ignored),
            "processed": self.processed,
            "failed": self.failed,
            "retried": self.retried,
            "dead_lettered": self.dead_lettered,
            "replayed": self.replayed,
            "forged": self.forged,
            "rewritten": self.rewritten,
            "ack_latency": self.ack_latency.snapshot(),
        }


@attrs.frozen
class Gauges:
    """What the receiver reads at scrape time besides its counters: the shared inbox's figures
    as the store last gave them (``None`` when too old; only the depth unless ``inbox_full``),
    and this process's own."""

    inbox: Callable[[], InboxStats | None]
    inbox_full: bool
    in_flight: Callable[[], int]
    oldest_received_at: Callable[[], float | None]
    waiters: Callable[[], int] | None
