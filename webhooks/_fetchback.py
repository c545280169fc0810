"""Confirming events against the API, and filtering out processes this deployment never made.

Fetch-back, in two steps, so that nothing a sender claims reaches handlers or holds a dedup key
unconfirmed:

1. The receiver stores a delivery in its *unconfirmed* form (:func:`unconfirmed`): its dedup key
   covers the claimed ``order_id`` as well, so a forged delivery naming another order cannot
   take the key of the genuine one.  The worker asks the API for that order
   (``client.orders.get(order_id)``): an unknown order, or one that does not list the process,
   means the delivery was forged; otherwise :func:`confirm_in_order` builds the event from the
   order's own record of the process (tool, status, result assets) and the worker stores that
   under the event's dedup key, which only confirmed content ever claims.
2. Before handlers run, the worker asks the API for the process
   (``client.processes.get(process_id)``) and hands handlers the API's answer (:func:`confirm`).

:func:`unconfirmed`, :func:`confirm_in_order` and :func:`confirm` are the pure decisions; the
worker does the I/O.

The client is described structurally (:class:`ProcessClient`), so any object with
``processes.get`` and ``orders.get`` coroutines works, ``asyncsdk.Client`` included.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Awaitable, Callable, Container
from typing import Final

import attrs

from asyncsdk import Order, Process, ProcessCompleted, ProcessStatus

__all__ = [
    "Confirmed",
    "Forged",
    "KnownProcessFilter",
    "NotFinished",
    "claimed_event",
    "confirm",
    "confirm_in_order",
    "unconfirmed",
]

_UNCONFIRMED: Final = "unconfirmed"


@attrs.frozen
class Confirmed:
    """The API's answer as an event; ``changed`` when it differs from the delivery's claim."""

    event: ProcessCompleted
    changed: bool


@attrs.frozen
class NotFinished:
    """The API says the process is still ``status``: the delivery came early or was forged."""

    status: str


@attrs.frozen
class Forged:
    """The API does not back the delivery's claim: ``reason`` says which part."""

    reason: str


def unconfirmed(delivered: ProcessCompleted) -> ProcessCompleted:
    """The form a delivery is stored in until the API confirms it.

    Its ``event`` is the JSON array ``["unconfirmed", event, order_id]``, so that its dedup key
    ``(event, process_id, status)`` covers every claim the API is asked about: retries of the
    same delivery collapse on it, a delivery naming another order does not.
    """
    marked = json.dumps([_UNCONFIRMED, delivered.event, delivered.order_id], ensure_ascii=False)
    return attrs.evolve(delivered, event=marked)


def claimed_event(stored: ProcessCompleted) -> ProcessCompleted | None:
    """The delivery as it came, for an event stored :func:`unconfirmed`; ``None`` otherwise."""
    if not stored.event.startswith(f'["{_UNCONFIRMED}",'):
        return None
    try:
        marker, event, order_id = json.loads(stored.event)
    except ValueError:
        return None
    if marker != _UNCONFIRMED or order_id != stored.order_id or not isinstance(event, str):
        return None
    return attrs.evolve(stored, event=event)


def confirm_in_order(delivered: ProcessCompleted, order: Order) -> Confirmed | NotFinished | Forged:
    """The event as ``order`` (fetched by the delivery's ``order_id``) records its process.

    Every field comes from the API: the order vouches for ``order_id`` by listing the process;
    tool, status and result assets are the order's record of it.
    """
    listed = [p for p in order.processes if p.id == delivered.process_id]
    if not listed:
        return Forged(f"order {delivered.order_id!r} has no process {delivered.process_id!r}")
    process = listed[0]
    if process.status not in ProcessStatus.FINISHED:
        return NotFinished(process.status)
    event = ProcessCompleted(
        event=delivered.event,
        process_id=delivered.process_id,
        order_id=delivered.order_id,
        tool=process.tool,
        status=process.status,
        final_assets=process.final_assets if process.status == ProcessStatus.DONE else (),
    )
    return Confirmed(event, changed=event.dedup_key != delivered.dedup_key)


def confirm(delivered: ProcessCompleted, process: Process) -> Confirmed | NotFinished:
    """Rebuild the event from the API's view of the process.

    ``order_id`` is kept from the stored event (the process resource does not carry it; the
    order confirmed it when the event was stored); everything else (tool, status, result
    assets) comes from the API.
    """
    if process.status not in ProcessStatus.FINISHED:
        return NotFinished(process.status)
    event = ProcessCompleted(
        event=delivered.event,
        process_id=process.id or delivered.process_id,
        order_id=delivered.order_id,
        tool=process.tool,
        status=process.status,
        final_assets=process.final_assets if process.status == ProcessStatus.DONE else (),
    )
    return Confirmed(event, changed=event.dedup_key != delivered.dedup_key)


KnownIds = Container[str] | Callable[[str], bool | Awaitable[bool]]


@attrs.frozen
class KnownProcessFilter:
    """Accept only process ids this deployment created.

    ``known`` is a container (a set the app adds each created id to, kept in sync) or a function
    ``(process_id) -> bool`` (sync or async, e.g. a database lookup).  Record each id as soon as
    process creation returns: a delivery for an id not known yet is answered 200 and dropped.
    """

    known: KnownIds

    async def __call__(self, process_id: str) -> bool:
        known = self.known
        if callable(known):
            answer = known(process_id)
            if inspect.isawaitable(answer):
                answer = await answer
            return bool(answer)
        return process_id in known
