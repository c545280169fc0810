"""One delivery's request path, the same for every event kind.

In order, and never slower than the store's commit: a token in the path (before a byte of the
body is read), body-size cap (Content-Length, then while
reading), content type, raw body, verification, the kind's parse, an optional filter (the
service's process filter), backpressure,
then one atomic dedup claim + durable persist (the pool's ``submit_put``, which neither a client
that hangs up nor the ``put_timeout`` deadline interrupts: they only stop the request waiting for
it) and the 2xx.  Handlers never run here; the worker pool runs them from the inbox.
"""

from __future__ import annotations

import asyncio
import collections
import json
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Final, Generic, TypeVar

import attrs
from aiohttp import hdrs, web
from multidict import CIMultiDictProxy

from webhooks._backpressure import SharedDepth
from webhooks._contract import Delivery, Ignored, Rejection, StoredEvent, Verifier
from webhooks._kinds import EventKind
from webhooks._metrics import Metrics
from webhooks._observe import (
    NO_RECEIVER_TELEMETRY,
    DeliverySpan,
    ReceiverTelemetry,
    log_fields,
)
from webhooks._parse import check_content_type
from webhooks._verify import TOKEN_PARAM

__all__ = ["INTAKE_KEY", "Intake", "ProcessFilter"]

logger = logging.getLogger("webhooks")

ProcessFilter = Callable[[str], Awaitable[bool]]

E = TypeVar("E", bound=StoredEvent)

_READ_CHUNK: Final = 64 * 1024
_JSON_HEADERS: Final = {hdrs.CONTENT_TYPE: "application/json; charset=utf-8"}
_OK_BODIES: Final = {
    status: json.dumps({"status": status}).encode()
    for status in ("accepted", "duplicate", "ignored")
}


def _lower_case(headers: CIMultiDictProxy[str]) -> dict[str, str]:
    """The request's headers as a verifier sees them: lower-case names, the first value of each."""
    lowered: dict[str, str] = {}
    for name, value in headers.items():
        lowered.setdefault(name.lower(), value)
    return lowered


class _Deadlines:
    """Gives up on store answers ``seconds`` after each began, with one timer for all of them.

    Every wait lasts as long and they begin in order, so they also end in order: a queue of
    ``(deadline, answer)`` and one timer for the oldest answer still awaited take the place of a
    timer per request.  A late answer is cancelled, which only stops its request waiting.
    Kept for the row "128 conns, flat out, receiver + SQLiteInbox: x peer CPU/req" (asyncio.timeout
    instead adds 37,000 instructions per delivery, benchmarks/FINDINGS.md).
    """

    __slots__ = ("_seconds", "_timer", "_waits")

    def __init__(self, seconds: float) -> None:
        self._seconds = seconds
        self._waits: collections.deque[tuple[float, asyncio.Future[Any]]] = collections.deque()
        self._timer: asyncio.TimerHandle | None = None

    def watch(self, answer: asyncio.Future[Any]) -> None:
        waits = self._waits
        while waits and waits[0][1].done():
            waits.popleft()
        loop = answer.get_loop()
        deadline = loop.time() + self._seconds
        waits.append((deadline, answer))
        if self._timer is None:
            self._timer = loop.call_at(deadline, self._expire, loop)

    def _expire(self, loop: asyncio.AbstractEventLoop) -> None:
        self._timer = None
        waits = self._waits
        now = loop.time()
        while waits:
            deadline, answer = waits[0]
            if not answer.done():
                if deadline > now:
                    self._timer = loop.call_at(deadline, self._expire, loop)
                    return
                answer.cancel()
            waits.popleft()


@attrs.define(kw_only=True, eq=False)
class Intake(Generic[E]):
    """The request path of one receiver.  ``submit_put``, ``is_running``, ``depth`` and
    ``stored`` are the receiver's: how a delivery is stored (the worker pool's
    :meth:`~webhooks._pool.WorkerPool.submit_put`, which keeps :meth:`~webhooks.Inbox.submit_put`'s
    contract), whether it accepts deliveries, the shared inbox's depth, and "one more was
    stored".  ``kind`` reads the verified delivery into its event; ``admit`` (optional) drops
    events this deployment does not know (answered 200 ``ignored``); ``stored_form`` is what is
    stored of an event (the service's unconfirmed form, with fetch-back)."""

    submit_put: Callable[[E, bytes], asyncio.Future[bool]]
    verifier: Verifier
    metrics: Metrics
    kind: EventKind[E]
    admit: Callable[[E], Awaitable[bool]] | None = None
    stored_form: Callable[[E], E] | None = None
    max_body: int
    read_timeout: float
    put_timeout: float
    queue_limit: int
    retry_after: int
    is_running: Callable[[], bool]
    depth: SharedDepth
    stored: Callable[[], None]
    telemetry: ReceiverTelemetry = NO_RECEIVER_TELEMETRY
    _deadlines: _Deadlines = attrs.field(init=False)

    def __attrs_post_init__(self) -> None:
        self._deadlines = _Deadlines(self.put_timeout)

    def _refuse(self, rejection: Rejection) -> web.Response:
        self.metrics.rejected[rejection.code] += 1
        logger.debug("webhook delivery refused with %d (%s)", rejection.status, rejection.code)
        response = web.json_response({"error": rejection.reason}, status=rejection.status)
        if rejection.status == 413:
            response.force_close()  # the rest of the body is not read
        return response

    def _unavailable(self, code: str, reason: str) -> web.Response:
        self.metrics.unavailable[code] += 1
        return web.json_response(
            {"error": reason},
            status=503,
            headers={hdrs.RETRY_AFTER: str(self.retry_after)},
        )

    def _ok(self, status: str, started: float) -> web.Response:
        self.metrics.ack_latency.observe(time.perf_counter() - started)
        return web.Response(body=_OK_BODIES[status], headers=_JSON_HEADERS)

    def _too_large(self) -> Rejection:
        return Rejection(413, "too_large", f"body exceeds {self.max_body} bytes; send one event")

    async def _read_body(self, request: web.Request) -> bytes | Rejection:
        content = request.content
        if content.is_eof():
            # The whole body is buffered already: nothing to wait for, so no timer.
            try:
                body = content.read_nowait()
            except (OSError, ValueError, web.HTTPException, web.RequestPayloadError) as exc:
                return Rejection(400, "bad_body", f"could not read the body: {type(exc).__name__}")
            if len(body) > self.max_body:
                return self._too_large()
            return body
        chunks: list[bytes] = []
        size = 0
        try:
            async with asyncio.timeout(self.read_timeout):
                while True:
                    chunk = await request.content.read(_READ_CHUNK)
                    if not chunk:
                        break
                    size += len(chunk)
                    if size > self.max_body:
                        return self._too_large()
                    chunks.append(chunk)
        except TimeoutError:
            return Rejection(408, "read_timeout", "the body took too long to arrive")
        except (OSError, ValueError, web.HTTPException, web.RequestPayloadError) as exc:
            # RequestPayloadError: a body that does not decode as its Content-Encoding says.
            return Rejection(400, "bad_body", f"could not read the body: {type(exc).__name__}")
        return b"".join(chunks)

    def _refuse_unread(self, request: web.Request, rejection: Rejection) -> web.Response:
        """Refuse a request whose body is left unread, or could not be decoded, on a connection
        that then closes.

        aiohttp reads what is left of a body after the answer, to keep the connection; a body
        that already failed to decode as its ``Content-Encoding`` says would then be logged as
        an unhandled exception.  Such a body is marked ended here: nothing more is read.
        """
        if request.content.exception() is not None:
            request.content.feed_eof()
        response = self._refuse(rejection)
        response.force_close()
        return response

    async def handle(self, request: web.Request) -> web.StreamResponse:
        """The sub-application's route handler: the token (if any) comes from the matched route."""
        return await self.receive(request.match_info, request)

    async def receive(
        self, path_params: Mapping[str, str], request: web.Request, *, token_routed: bool = False
    ) -> web.StreamResponse:
        """One delivery, from the first byte to the answer (in a span when tracing is on).

        ``token_routed``: the request came by the exact route of one of the verifier's
        :attr:`~webhooks.Verifier.path_tokens` (what :meth:`~webhooks.WebhookReceiver.setup`
        adds), so its path token needs no check before the body is read.
        """
        with self.telemetry.delivery() as span:
            response = await self._receive(path_params, request, span, token_routed)
            span.answered(response.status)
            return response

    async def _receive(
        self,
        path_params: Mapping[str, str],
        request: web.Request,
        span: DeliverySpan,
        token_routed: bool,
    ) -> web.StreamResponse:
        started = time.perf_counter()
        self.metrics.received += 1
        if not self.is_running():
            return self._unavailable("stopping", "the receiver is not running; retry later")
        if not token_routed and TOKEN_PARAM in path_params and self.verifier.path_tokens:
            # The token first, with the body unread: a stranger's body is never read, inflated
            # or decoded (the verifier checks the full delivery again below).  A token routed
            # exactly is one the verifier listed: a stranger cannot reach that route.
            rejection = self.verifier.verify(
                Delivery(_lower_case(request.headers), path_params, b"")
            )
            if rejection is not None:
                return self._refuse_unread(request, rejection)

        length = request.content_length
        if length is not None and length > self.max_body:
            return self._refuse(self._too_large())
        content_type = request.headers.get(hdrs.CONTENT_TYPE)
        rejection = check_content_type(content_type)
        if rejection is not None:
            return self._refuse(rejection)
        body = await self._read_body(request)
        if isinstance(body, Rejection):
            return self._refuse_unread(request, body)

        delivery = Delivery(
            headers=_lower_case(request.headers),
            path_params=path_params,
            body=body,
        )
        rejection = self.verifier.verify(delivery)
        if rejection is not None:
            return self._refuse(rejection)

        event = self.kind.parse(delivery)
        if isinstance(event, Rejection):
            return self._refuse(event)
        if isinstance(event, Ignored):
            self.metrics.ignored[event.code] += 1
            return self._ok("ignored", started)
        span.event(event)

        if self.admit is not None:
            try:
                known = await self.admit(event)
            except Exception:
                logger.exception("the webhook process filter failed")
                return self._unavailable("filter", "could not check the process id; retry later")
            if not known:
                self.metrics.ignored["unknown_process"] += 1
                return self._ok("ignored", started)

        if not self.depth.under(self.queue_limit) and await self.depth.over(self.queue_limit):
            return self._unavailable("queue_full", "too many events waiting; retry later")
        return await self._store(event, body, started)

    async def _store(self, event: E, body: bytes, started: float) -> web.Response:
        try:
            # The write goes ahead whatever becomes of ``answer``: a client that hangs up (with
            # handler_cancellation on) or the deadline only stops this request waiting for it.
            stored_form = self.stored_form
            answer = self.submit_put(event if stored_form is None else stored_form(event), body)
        except Exception as exc:
            logger.warning("the webhook inbox failed to store an event: %s", exc)
            return self._unavailable("store_unavailable", "the event store is unavailable")
        if not answer.done():
            self._deadlines.watch(answer)
        try:
            stored = await answer
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if task is not None and task.cancelling():
                raise  # this request itself is being cancelled
            logger.warning("the webhook inbox took longer than %s s to store", self.put_timeout)
            return self._unavailable("store_slow", "the event store is slow; retry later")
        except Exception as exc:
            logger.warning("the webhook inbox failed to store an event: %s", exc)
            return self._unavailable("store_unavailable", "the event store is unavailable")
        return self._answer_stored(event, stored, started)

    def _answer_stored(self, event: E, stored: bool, started: float) -> web.Response:
        if logger.isEnabledFor(logging.DEBUG):
            outcome = "stored" if stored else "a duplicate"
            logger.debug("webhook for %s is %s", event.summary, outcome, extra=log_fields(event))
        if stored:
            self.metrics.accepted += 1
            self.stored()
            return self._ok("accepted", started)
        self.metrics.duplicate += 1
        return self._ok("duplicate", started)


INTAKE_KEY: Final = web.AppKey("webhooks.intake", Intake[Any])
"""Marks a receiver's own application (the one :attr:`WebhookReceiver.app` builds)."""
