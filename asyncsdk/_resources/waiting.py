"""Waiting for a process to finish: the webhook registry first, then polling, under one deadline.

:class:`ResultWaiter` is what the client needs from a webhook-fed registry (the registries
themselves live in :mod:`webhooks`, in memory or on Redis); the client depends only on this
protocol, so the two halves stay apart and either can be used alone.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Protocol, runtime_checkable

import attrs

from asyncsdk._checks import require_number, require_text
from asyncsdk._errors import AsyncSDKError, ProcessFailedError, WaitTimeoutError
from asyncsdk._models import Process, ProcessCompleted, ProcessStatus

__all__ = ["ResultWaiter", "Waiting"]

_log = logging.getLogger("asyncsdk")


@runtime_checkable
class ResultWaiter(Protocol):
    """Anything that can await the ``process.completed`` event of one process."""

    @property
    def healthy(self) -> bool:
        """False when the receiver feeding this registry is known to be down; callers then poll."""
        ...

    async def wait(self, process_id: str, *, timeout: float | None = None) -> ProcessCompleted:
        """Return the event for ``process_id`` as soon as it lands (or at once if it already has).

        Raises ``TimeoutError`` (``asyncio.TimeoutError``) when ``timeout`` passes first, and an
        ``AsyncSDKError`` subclass when the registry shuts down while waiting.
        """
        ...


def _process_from_event(event: ProcessCompleted) -> Process:
    return Process(
        id=event.process_id, tool=event.tool, status=event.status, final_assets=event.final_assets
    )


@attrs.define
class _WaitState:
    last_status: str | None = None


@attrs.frozen
class Waiting:
    """Waits for processes with ``get`` (one GET of a process) as its only way to the service.

    ``min_poll_interval`` is the client's floor between two polls of one process.
    """

    get: Callable[[str], Awaitable[Process]]
    min_poll_interval: float

    async def wait(
        self,
        process_id: str,
        *,
        timeout: float = 600.0,
        registry: ResultWaiter | None = None,
        webhook_grace: float | None = None,
        poll_interval: float | None = None,
        raise_on_failure: bool = False,
    ) -> Process:
        """See :meth:`asyncsdk._resources.Processes.wait`."""
        require_text(process_id, "process_id")
        require_number(timeout, "timeout must be a finite number of seconds >= 0")
        for name, value in (("webhook_grace", webhook_grace), ("poll_interval", poll_interval)):
            if value is not None:
                require_number(value, f"{name} must be a finite number of seconds >= 0, or None")
        interval = self.min_poll_interval
        if poll_interval is not None:
            interval = max(interval, poll_interval)
        if webhook_grace is None:
            # A webhook lost on its way must not cost the result: poll for the second half.
            webhook_grace = timeout / 2
        state = _WaitState()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        try:
            async with asyncio.timeout_at(deadline) as scope:
                process = await self._until_finished(
                    process_id, registry, webhook_grace, interval, state
                )
        except TimeoutError as exc:
            if not scope.expired():
                raise
            raise WaitTimeoutError(
                f"process {process_id} did not finish within {timeout:g} s "
                f"(last status: {state.last_status or 'unknown'}); it may still finish: wait "
                "again with a longer timeout",
                process_id=process_id,
                last_status=state.last_status,
            ) from exc
        if raise_on_failure and process.status == ProcessStatus.FAILED:
            raise ProcessFailedError(
                f"process {process_id} ({process.tool}) failed", process=process
            )
        return process

    async def _until_finished(
        self,
        process_id: str,
        registry: ResultWaiter | None,
        webhook_grace: float,
        interval: float,
        state: _WaitState,
    ) -> Process:
        event = None
        if registry is not None:
            event = await self._from_registry(process_id, registry, webhook_grace, interval)
        while event is None:
            process = await self.get(process_id)
            state.last_status = process.status
            if process.is_finished:
                return process
            # Counted from the answer, not the request: the service then sees the GETs at least
            # ``interval`` apart whatever the network did to either of them.
            event = await self._between_polls(process_id, registry, interval)
        state.last_status = event.status
        return _process_from_event(event)

    async def _between_polls(
        self, process_id: str, registry: ResultWaiter | None, interval: float
    ) -> ProcessCompleted | None:
        """Wait ``interval`` before the next poll, listening to a healthy registry meanwhile: a
        webhook that comes late still ends the wait at once (``None``: time to poll)."""
        loop = asyncio.get_running_loop()
        next_poll = loop.time() + interval
        if registry is not None and registry.healthy:
            try:
                return await registry.wait(process_id, timeout=interval)
            except TimeoutError:
                return None
            except AsyncSDKError as exc:
                _log.debug("webhook registry failed while waiting for %s (%s)", process_id, exc)
        await asyncio.sleep(max(0.0, next_poll - loop.time()))
        return None

    async def _from_registry(
        self,
        process_id: str,
        registry: ResultWaiter,
        webhook_grace: float,
        interval: float,
    ) -> ProcessCompleted | None:
        """The webhook event, or ``None`` once it is time to poll instead.

        The registry is asked in slices of ``interval`` so that a receiver going down while we
        wait is noticed (``healthy`` turns false) and polling takes over.
        """
        loop = asyncio.get_running_loop()
        grace_end = loop.time() + webhook_grace
        while registry.healthy:
            remaining = min(interval, grace_end - loop.time())
            if remaining <= 0:
                return None
            try:
                return await registry.wait(process_id, timeout=remaining)
            except TimeoutError:
                continue
            except AsyncSDKError as exc:
                _log.warning(
                    "webhook registry failed while waiting for %s (%s); polling", process_id, exc
                )
                return None
        return None
