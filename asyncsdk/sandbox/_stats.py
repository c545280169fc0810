"""Counters of what the sandbox received and did, so tests can prove what happened on the wire."""

from __future__ import annotations

import secrets
from collections import Counter
from typing import Any

import attrs

from asyncsdk.sandbox._masking import mask_url

__all__ = ["Attempt", "Delivery", "Stats"]


@attrs.frozen(kw_only=True)
class Attempt:
    """One POST of a delivery: when, how long, and the receiver's answer or the error.

    ``status`` is ``None`` when no answer came (``error`` says why); ``answer`` is the start of
    the body answered; ``retry_in`` the seconds until the next attempt, ``None`` after the last.
    """

    number: int
    at: str
    duration_ms: float
    status: int | None
    error: str = ""
    answer: str = ""
    retry_in: float | None = None


@attrs.define(kw_only=True)
class Delivery:
    """One webhook delivery (a duplicate is its own delivery) and how it went.

    ``finished`` is true once it was delivered or given up; ``history`` holds every attempt,
    those of a resend (``POST /_sandbox/deliveries/{id}/resend``) after the first ones.
    """

    id: str = attrs.Factory(lambda: secrets.token_hex(6))
    url: str
    process_id: str
    status: str
    copy: int = 0
    attempts: int = 0
    response_statuses: list[int | None] = attrs.Factory(list)
    delivered: bool = False
    error: str = ""
    finished: bool = False
    history: list[Attempt] = attrs.Factory(list)

    def wire(self) -> dict[str, Any]:
        """The delivery as ``GET /_sandbox/stats`` shows it: its URL masked as on the page."""
        return {**attrs.asdict(self), "url": mask_url(self.url)}


@attrs.define(kw_only=True)
class Stats:
    """``requests`` counts ``"METHOD /route"`` (route templates, e.g. ``"GET /v3/process/{id}"``).

    Every request that reached the server is counted, including those a chaos rule answered or
    dropped; ``processes_created``/``orders_created`` count only what was really created.
    """

    projects_created: int = 0
    orders_created: int = 0
    assets_uploaded: int = 0
    processes_created: int = 0
    processes_done: int = 0
    processes_failed: int = 0
    requests: Counter[str] = attrs.Factory(Counter)
    chaos_fired: Counter[str] = attrs.Factory(Counter)
    deliveries: list[Delivery] = attrs.Factory(list)

    @property
    def webhook_deliveries(self) -> list[Delivery]:
        return self.deliveries

    def wire(self) -> dict[str, Any]:
        return {
            "projects_created": self.projects_created,
            "orders_created": self.orders_created,
            "assets_uploaded": self.assets_uploaded,
            "processes_created": self.processes_created,
            "processes_done": self.processes_done,
            "processes_failed": self.processes_failed,
            "requests": dict(self.requests),
            "chaos_fired": dict(self.chaos_fired),
            "deliveries": [d.wire() for d in self.deliveries],
        }
