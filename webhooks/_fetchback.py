"""Confirming events against the API, and filtering out processes this deployment never made.

Fetch-back: before handlers run, the worker asks the API for the process
(``await client.processes.get(process_id)``) and hands handlers the API's answer instead of the
delivered body.  A forged ``done`` then changes nothing: the handler sees what the service says.
:func:`confirm` is the pure decision; the worker does the I/O.

The client is described structurally (:class:`ProcessClient`), so any object with a
``processes.get`` coroutine works, ``asyncsdk.Client`` included.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Container

import attrs

from asyncsdk import Process, ProcessCompleted, ProcessStatus

__all__ = [
    "Confirmed",
    "KnownProcessFilter",
    "NotFinished",
    "confirm",
]


@attrs.frozen
class Confirmed:
    """The API's answer as an event; ``changed`` when it differs from the delivery's claim."""

    event: ProcessCompleted
    changed: bool


@attrs.frozen
class NotFinished:
    """The API says the process is still ``status``: the delivery came early or was forged."""

    status: str


def confirm(delivered: ProcessCompleted, process: Process) -> Confirmed | NotFinished:
    """Rebuild the event from the API's view of the process.

    ``order_id`` is kept from the delivery (the process resource does not carry it); everything
    else (tool, status, result assets) comes from the API.
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
