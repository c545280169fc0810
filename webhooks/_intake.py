"""One delivery's request path, the same for every event kind and every web framework.

Sans-I/O: :meth:`Intake.deliver` takes what any framework gives (the path token, lower-case
headers, a :class:`Body`) and returns the :class:`Answer`; a framework adapter
(``webhooks/_aiohttp_intake.py``, ``webhooks/asgi.py``) only translates its request and response.

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
from typing import Any, Final, Generic, Protocol, TypeVar

import attrs

from webhooks._backpressure import SharedDepth
from webhooks._contract import Delivery, Ignored, Rejection, StoredEvent, Verifier
from webhooks._kinds import EventKind
from webhooks._observability.counters import Metrics
from webhooks._observability.telemetry import (
    NO_RECEIVER_TELEMETRY,
    DeliverySpan,
    ReceiverTelemetry,
    log_fields,
)
from webhooks._parse import check_content_encoding, check_content_type
from webhooks._verify import TOKEN_PARAM

__all__ = ["Answer", "Body", "BodyUnreadable", "Intake", "ProcessFilter"]

logger = logging.getLogger("webhooks")

ProcessFilter = Callable[[str], Awaitable[bool]]

E = TypeVar("E", bound=StoredEvent)

_READ_CHUNK: Final = 64 * 1024
_READ_TIMEOUT: Final = "read_timeout"
"""The code of a body that took longer than ``read_timeout`` to arrive."""
_JSON_HEADERS: Final = {"Content-Type": "application/json; charset=utf-8"}


@attrs.frozen
class Answer:
    """What the receiver answers one request: ``status``, ``headers``, ``body``; ``close``: the
    connection closes after it (the rest of the request body is left unread)."""

    status: int
    headers: Mapping[str, str]
    body: bytes
    close: bool = False


class BodyUnreadable(Exception):
    """A framework adapter's body could not be read (the connection broke, or the body does not
    decode as its ``Content-Encoding`` says); ``name`` says what went wrong, for the answer."""

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.name = name


class Body(Protocol):
    """A request body as a framework adapter gives it to :meth:`Intake.deliver`, which applies
    the size cap and the read timeout.  Both methods raise :class:`BodyUnreadable`.
    ``decoded``: the ``Content-Encoding`` codings the adapter's server decodes before the body
    reaches it (any other coding is answered 415)."""

    @property
    def decoded(self) -> tuple[str, ...]: ...

    def arrived(self) -> bytes | None:
        """The whole body if it has arrived already (read without waiting), else ``None``."""

    async def chunk(self) -> bytes:
        """The next part of the body; ``b""`` at its end."""


_OK: Final = {
    status: Answer(200, _JSON_HEADERS, json.dumps({"status": status}).encode())
    for status in ("accepted", "duplicate", "ignored")
}


def _json_answer(
    status: int, error: str, headers: Mapping[str, str] = _JSON_HEADERS, close: bool = False
) -> Answer:
    return Answer(status, headers, json.dumps({"error": error}).encode(), close)


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

    def _refuse(self, rejection: Rejection, close: bool = False) -> Answer:
        self.metrics.rejected[rejection.code] += 1
        logger.debug("webhook delivery refused with %d (%s)", rejection.status, rejection.code)
        # A 413 leaves the rest of the body unread: the connection closes.
        headers = {**_JSON_HEADERS, **dict(rejection.headers)} if rejection.headers else None
        return _json_answer(
            rejection.status,
            rejection.reason,
            _JSON_HEADERS if headers is None else headers,
            close=close or rejection.status == 413,
        )

    def _unavailable(self, code: str, reason: str, close: bool = False) -> Answer:
        self.metrics.unavailable[code] += 1
        headers = {**_JSON_HEADERS, "Retry-After": str(self.retry_after)}
        return _json_answer(503, reason, headers, close)

    def _ok(self, status: str, started: float) -> Answer:
        self.metrics.ack_latency.observe(time.perf_counter() - started)
        return _OK[status]

    def _too_large(self) -> Rejection:
        return Rejection(413, "too_large", f"body exceeds {self.max_body} bytes; send one event")

    async def _read_body(self, body: Body) -> bytes | Rejection:
        try:
            whole = body.arrived()
        except BodyUnreadable as exc:
            return Rejection(400, "bad_body", f"could not read the body: {exc.name}")
        if whole is not None:
            # The whole body is buffered already: nothing to wait for, so no timer.
            if len(whole) > self.max_body:
                return self._too_large()
            return whole
        chunks: list[bytes] = []
        size = 0
        try:
            async with asyncio.timeout(self.read_timeout):
                while True:
                    chunk = await body.chunk()
                    if not chunk:
                        break
                    size += len(chunk)
                    if size > self.max_body:
                        return self._too_large()
                    chunks.append(chunk)
        except TimeoutError:
            return Rejection(408, _READ_TIMEOUT, "the body took too long to arrive")
        except BodyUnreadable as exc:
            return Rejection(400, "bad_body", f"could not read the body: {exc.name}")
        return b"".join(chunks)

    async def deliver(
        self,
        path_params: Mapping[str, str],
        headers: Mapping[str, str],
        body: Body,
        *,
        token_routed: bool = False,
    ) -> Answer:
        """One delivery, from the first byte to the answer (in a span when tracing is on).

        ``path_params``: the token in the path, if any (``{TOKEN_PARAM: token}``); ``headers``: the
        request's headers as a verifier sees them, lower-case names and the first value of each.
        ``token_routed``: the request came by the exact route of one of the verifier's
        :attr:`~webhooks.Verifier.path_tokens`, so its path token needs no check before the body
        is read.  An answer with ``close`` set leaves the rest of the body unread.
        """
        with self.telemetry.delivery() as span:
            answer = await self._deliver(path_params, headers, body, span, token_routed)
            span.answered(answer.status)
            return answer

    async def _deliver(
        self,
        path_params: Mapping[str, str],
        headers: Mapping[str, str],
        body: Body,
        span: DeliverySpan,
        token_routed: bool,
    ) -> Answer:
        started = time.perf_counter()
        self.metrics.received += 1
        if not self.is_running():
            return self._unavailable("stopping", "the receiver is not running; retry later")
        if not token_routed and TOKEN_PARAM in path_params and self.verifier.path_tokens:
            # The token first, with the body unread: a stranger's body is never read, inflated
            # or decoded (the verifier checks the full delivery again below).  A token routed
            # exactly is one the verifier listed: a stranger cannot reach that route.
            rejection = self.verifier.verify(Delivery(headers, path_params, b""))
            if rejection is not None:
                return self._refuse(rejection, close=True)

        length = headers.get("content-length")
        declared = (
            int(length) if length is not None and length.isascii() and length.isdigit() else 0
        )
        if declared > self.max_body:
            return self._refuse(self._too_large())
        rejection = check_content_type(headers.get("content-type")) or check_content_encoding(
            headers.get("content-encoding"), body.decoded
        )
        if rejection is not None:
            return self._refuse(rejection)
        raw = await self._read_body(body)
        if isinstance(raw, Rejection):
            if raw.code == _READ_TIMEOUT and not self.is_running():
                # The drain began while the body was arriving: a server reads nothing more on a
                # connection it closes at shutdown, so the sender was not slow; it retries.
                return self._unavailable("stopping", "the receiver stopped; retry later", True)
            return self._refuse(raw, close=True)

        delivery = Delivery(headers=headers, path_params=path_params, body=raw)
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
        return await self._store(event, raw, started)

    async def _store(self, event: E, body: bytes, started: float) -> Answer:
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

    def _answer_stored(self, event: E, stored: bool, started: float) -> Answer:
        if logger.isEnabledFor(logging.DEBUG):
            outcome = "stored" if stored else "a duplicate"
            logger.debug("webhook for %s is %s", event.summary, outcome, extra=log_fields(event))
        if stored:
            self.metrics.accepted += 1
            self.stored()
            return self._ok("accepted", started)
        self.metrics.duplicate += 1
        return self._ok("duplicate", started)
