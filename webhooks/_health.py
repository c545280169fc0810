"""An orchestrator's view of a receiver: the readiness and liveness routes its probes call.

:class:`Readiness` answers ``200`` while the receiver runs and its store answers a
:meth:`~webhooks.Inbox.check` within ``timeout`` seconds, and ``503`` otherwise: from the moment
its drain begins (and, should it be asked, before it starts), and while the store is down or
does not answer.
:func:`liveness_view` answers ``200`` whenever the process's event loop serves the request,
draining included: a draining process is alive, and restarting it would cut its drain short.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Final

from aiohttp import web

from webhooks._contract import Inbox

__all__ = ["Readiness", "liveness_view"]

logger = logging.getLogger("webhooks")

_NOT_RUNNING: Final = {
    "new": "the receiver has not started",
    "stopping": "the receiver is draining",
    "stopped": "the receiver has stopped",
}


class Readiness:
    """Whether this receiver takes deliveries now, as :meth:`view` (the ``GET`` handler) says.

    ``state``: the receiver's lifecycle state (``new``, ``running``, ``stopping``, ``stopped``);
    the store is asked only while it is ``running``.  One check at a time: a check the store
    leaves unanswered past ``timeout`` (a frozen server; a client library may take longer than
    that to give up on it) goes on in the background while the probe gets its 503, and a probe
    that comes while one is under way waits for that one, so probes never pile checks up on a
    stalled store.
    """

    def __init__(self, state: Callable[[], str], inbox: Inbox, timeout: float) -> None:
        self._state = state
        self._inbox = inbox
        self._timeout = timeout
        self._check: asyncio.Task[None] | None = None

    async def view(self, _request: web.Request) -> web.Response:
        now = self._state()
        if now != "running":
            return _not_ready("stopping" if now != "new" else "starting", _NOT_RUNNING[now])
        check = self._check
        if check is None or check.done():
            check = self._check = asyncio.get_running_loop().create_task(
                self._inbox.check(), name="webhooks-readiness-check"
            )
            check.add_done_callback(_seen)
        done, _ = await asyncio.wait([check], timeout=self._timeout)
        if not done:
            return _not_ready(
                "store_unavailable", f"the event store did not answer within {self._timeout:g} s"
            )
        if check.cancelled() or check.exception() is not None:
            return _not_ready("store_unavailable", "the event store is unavailable")
        return web.json_response({"status": "ready"})

    def stop(self) -> None:
        """Cancel a check still under way (the receiver stops; its inbox closes)."""
        if self._check is not None:
            self._check.cancel()


def _seen(check: asyncio.Task[None]) -> None:
    """Log why a check failed, which also marks its exception as retrieved."""
    if not check.cancelled() and check.exception() is not None:
        logger.debug("readiness: the webhook inbox check failed (%s)", check.exception())


def liveness_view() -> Callable[[web.Request], Awaitable[web.Response]]:
    """The ``GET`` handler that answers ``200`` whenever it runs."""

    async def view(_request: web.Request) -> web.Response:
        return web.json_response({"status": "alive"})

    return view


def _not_ready(status: str, reason: str) -> web.Response:
    return web.json_response({"status": status, "reason": reason}, status=503)
