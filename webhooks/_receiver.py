"""The aiohttp side: a mountable sub-application that receives ``process.completed``.

Request path, in order, and never slower than the store's commit: body-size cap (Content-Length,
then while reading), content type, raw body, verification, parsing, optional process filter,
backpressure, then one atomic dedup claim + durable persist (``inbox.put``, which neither a client
that hangs up nor the ``put_timeout`` deadline interrupts: they only stop the request waiting for
it) and the 2xx.  Handlers never run on the request path; the worker pool runs them from
the inbox.

::

    receiver = WebhookReceiver(inbox=SQLiteInbox("hooks.db"), verifier=TokenVerifier(token))

    @receiver.on_completed(status="done")
    async def publish(event: ProcessCompleted) -> None: ...

    app = web.Application()
    receiver.setup(app, prefix="/hooks/")
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import functools
import json
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Iterator, Mapping
from types import MappingProxyType
from typing import Any, Final, Literal, Protocol, TypeVar, overload, runtime_checkable

from aiohttp import hdrs, web
from aiohttp.web_log import AccessLogger
from multidict import CIMultiDictProxy

from asyncsdk import ConfigurationError, ProcessCompleted
from webhooks._fetchback import ProcessClient
from webhooks._memory import MemoryInbox
from webhooks._metrics import Metrics
from webhooks._parse import Ignored, Parsed, Rejection, check_content_type, parse_body
from webhooks._store import (
    AtomicInbox,
    Inbox,
    InboxEntry,
    InboxUnavailableError,
    RegistrySink,
    ResultSink,
)
from webhooks._verify import TOKEN_PARAM, Delivery, Verifier
from webhooks._worker import AtomicHandler, Handler, HandlerSpec, RetryPolicy, WorkerPool

__all__ = ["RECEIVER_KEY", "RedactingAccessLogger", "WebhookReceiver"]

logger = logging.getLogger("webhooks")

H = TypeVar("H", bound=Handler)
A = TypeVar("A", bound=AtomicHandler)
ProcessFilter = Callable[[str], Awaitable[bool]]

_READ_CHUNK: Final = 64 * 1024
_JSON_HEADERS: Final = {hdrs.CONTENT_TYPE: "application/json; charset=utf-8"}
_OK_BODIES: Final = {
    status: json.dumps({"status": status}).encode()
    for status in ("accepted", "duplicate", "ignored")
}


class _LowerHeaders(Mapping[str, str]):
    """The request's headers as a verifier sees them: lower-case keys, the first value of each.

    A view over aiohttp's case-insensitive headers, so nothing is copied per request.
    """

    __slots__ = ("_headers",)

    def __init__(self, headers: CIMultiDictProxy[str]) -> None:
        self._headers = headers

    def __getitem__(self, key: str) -> str:
        return self._headers[key]

    def get(self, key: str, default: Any = None) -> Any:
        return self._headers.get(key, default)

    def __contains__(self, key: object) -> bool:
        return key in self._headers

    def __iter__(self) -> Iterator[str]:
        return iter(dict.fromkeys(key.lower() for key in self._headers))

    def __len__(self) -> int:
        return len({key.lower() for key in self._headers})

    def __repr__(self) -> str:
        return f"<headers {list(self)!r}>"


def _names(value: str | Iterable[str] | None, what: str) -> frozenset[str] | None:
    if value is None:
        return None
    names = frozenset((value,) if isinstance(value, str) else value)
    if not names or not all(isinstance(n, str) and n for n in names):
        raise ConfigurationError(f"{what} must be a non-empty string or a list of them")
    return names


@runtime_checkable
class _SubmitsPuts(Protocol):
    """An inbox that queues a put and answers through a future (:class:`~webhooks.SQLiteInbox`).

    The write goes ahead whatever becomes of the future, so nothing has to shield it.
    """

    def submit_put(self, event: ProcessCompleted, raw: bytes) -> asyncio.Future[bool]: ...


def _relay(answer: asyncio.Future[bool], task: asyncio.Task[bool]) -> None:
    """Pass a put task's outcome to the future its request awaits (if it still does)."""
    if answer.done():
        if not task.cancelled():
            task.exception()  # nobody waits any more: mark the outcome as seen
        return
    if task.cancelled():
        answer.set_exception(InboxUnavailableError("the store write was cancelled"))
    elif (error := task.exception()) is not None:
        answer.set_exception(error)
    else:
        answer.set_result(task.result())


class _Deadlines:
    """Gives up on store answers ``seconds`` after each began, with one timer for all of them.

    Every wait lasts as long and they begin in order, so they also end in order: a queue of
    ``(deadline, answer)`` and one timer for the oldest answer still awaited take the place of a
    timer per request.  A late answer is cancelled, which only stops its request waiting.
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


class WebhookReceiver:
    """Receives ``process.completed`` deliveries, stores them, and runs handlers from the store.

    Required: ``inbox`` (where accepted events live until handled: :class:`~webhooks.SQLiteInbox`,
    :class:`~webhooks.MemoryInbox`, the Redis one) and ``verifier`` (who may deliver:
    :class:`~webhooks.TokenVerifier`, :class:`~webhooks.StandardWebhooksVerifier`, or
    :class:`~webhooks.NoVerification` together with fetch-back).

    ``client``: fetch-back; every event is confirmed with ``client.processes.get`` before the
    registry and handlers see it, and they get the API's answer (an event the API still calls
    unfinished is asked about again after ``not_finished_delay`` seconds).  ``registry``: told
    about each event before handlers (and ``set_healthy`` on start/stop).  ``process_filter``:
    an async predicate (e.g. :class:`~webhooks.KnownProcessFilter`) dropping unknown process ids.

    Limits: ``max_body`` bytes per request (413 past it), ``read_timeout`` for the body (408),
    ``put_timeout`` for the store (503), ``queue_limit`` unfinished events before answering 503,
    ``workers`` concurrent entries, ``handler_timeout`` per handler, ``max_attempts`` hand-outs
    before dead letter, ``drain_timeout`` at shutdown.  ``retry_after`` is the ``Retry-After`` of
    503 answers.  ``close_inbox``: close the inbox when the receiver stops.
    """

    def __init__(
        self,
        *,
        inbox: Inbox,
        verifier: Verifier,
        client: ProcessClient | None = None,
        registry: ResultSink | None = None,
        process_filter: ProcessFilter | None = None,
        max_body: int = 256 * 1024,
        read_timeout: float = 4.0,
        put_timeout: float = 4.0,
        workers: int = 8,
        handler_timeout: float = 60.0,
        max_attempts: int = 5,
        retry_base: float = 1.0,
        retry_cap: float = 300.0,
        queue_limit: int = 10_000,
        drain_timeout: float = 10.0,
        retry_after: int = 5,
        poll_interval: float = 1.0,
        fetch_timeout: float = 30.0,
        not_finished_delay: float = 15.0,
        metrics_route: bool = False,
        close_inbox: bool = True,
        consumer: str | None = None,
    ) -> None:
        if not isinstance(inbox, Inbox):
            raise ConfigurationError(
                "inbox must implement webhooks.Inbox; use SQLiteInbox(path) or MemoryInbox()"
            )
        if not isinstance(verifier, Verifier):
            raise ConfigurationError(
                "verifier must have verify(delivery); use TokenVerifier(token), "
                "StandardWebhooksVerifier(secret) or NoVerification() with fetch-back"
            )
        for name, number in (
            ("max_body", max_body),
            ("workers", workers),
            ("max_attempts", max_attempts),
            ("queue_limit", queue_limit),
            ("retry_after", retry_after),
        ):
            if not isinstance(number, int) or number < 1:
                raise ConfigurationError(f"{name} must be a positive integer, not {number!r}")
        for name, seconds in (
            ("read_timeout", read_timeout),
            ("put_timeout", put_timeout),
            ("handler_timeout", handler_timeout),
            ("retry_base", retry_base),
            ("retry_cap", retry_cap),
            ("poll_interval", poll_interval),
            ("fetch_timeout", fetch_timeout),
            ("not_finished_delay", not_finished_delay),
        ):
            if seconds <= 0:
                raise ConfigurationError(f"{name} must be a positive number of seconds")
        if drain_timeout < 0:
            raise ConfigurationError("drain_timeout must be >= 0 seconds")
        if read_timeout + put_timeout >= 10:
            raise ConfigurationError(
                "read_timeout + put_timeout must stay under 10 s: the service wants a 2xx "
                "within 10 seconds"
            )
        self.inbox = inbox
        self.verifier = verifier
        self.client = client
        self.registry = registry
        self.process_filter = process_filter
        self.max_body = max_body
        self.read_timeout = float(read_timeout)
        self.put_timeout = float(put_timeout)
        self.queue_limit = queue_limit
        self.drain_timeout = float(drain_timeout)
        self.retry_after = retry_after
        self.metrics_route = metrics_route
        self.close_inbox = close_inbox
        self.metrics = Metrics()
        self.handlers: list[HandlerSpec] = []
        pool_options: dict[str, Any] = {} if consumer is None else {"consumer": consumer}
        self._pool = WorkerPool(
            inbox=inbox,
            handlers=self.handlers,
            metrics=self.metrics,
            workers=workers,
            handler_timeout=float(handler_timeout),
            retry=RetryPolicy(
                max_attempts=max_attempts,
                base=retry_base,
                cap=retry_cap,
                not_finished_delay=not_finished_delay,
            ),
            sink=registry,
            client=client,
            fetch_timeout=float(fetch_timeout),
            poll_interval=float(poll_interval),
            **pool_options,
        )
        self._app: web.Application | None = None
        self._mounted = False
        self._state = "new"  # new -> running -> stopping -> stopped
        self._puts: set[asyncio.Task[bool]] = set()
        self._put_never_waits = type(inbox) is MemoryInbox
        self._submit_put = inbox.submit_put if isinstance(inbox, _SubmitsPuts) else None
        self._deadlines = _Deadlines(self.put_timeout)
        self._stop_task: asyncio.Task[None] | None = None

    def __repr__(self) -> str:
        return f"<WebhookReceiver {self._state} inbox={self.inbox!r} verifier={self.verifier!r}>"

    # -- handlers -------------------------------------------------------------------------

    @overload
    def on_completed(
        self,
        *,
        status: str | Iterable[str] | None = None,
        tool: str | Iterable[str] | None = None,
        atomic: Literal[False] = False,
    ) -> Callable[[H], H]: ...

    @overload
    def on_completed(
        self,
        *,
        status: str | Iterable[str] | None = None,
        tool: str | Iterable[str] | None = None,
        atomic: Literal[True],
    ) -> Callable[[A], A]: ...

    def on_completed(
        self,
        *,
        status: str | Iterable[str] | None = None,
        tool: str | Iterable[str] | None = None,
        atomic: bool = False,
    ) -> Callable[[Any], Any]:
        """Register an ``async def handler(event: ProcessCompleted)`` for matching events.

        ``status`` / ``tool`` restrict it to those values (a string or several); by default it
        gets every event.  Handlers run in the worker, never on the request path.

        ``atomic=True``: the handler is ``async def handler(event, writes)`` and queues its
        writes on ``writes`` (a :class:`~webhooks.RedisWrites` with :class:`~webhooks.RedisInbox`)
        instead of writing; the inbox applies them together with the ack, so they happen once
        per event even if the process dies between the handler and the ack.
        """
        statuses = _names(status, "status")
        tools = _names(tool, "tool")

        def register(func: Any) -> Any:
            self.add_handler(func, statuses=statuses, tools=tools, atomic=atomic)
            return func

        return register

    def add_handler(
        self,
        func: Handler | AtomicHandler,
        *,
        statuses: frozenset[str] | None = None,
        tools: frozenset[str] | None = None,
        atomic: bool = False,
    ) -> None:
        if not callable(func):
            raise ConfigurationError("a handler must be an async function taking the event")
        if atomic and not isinstance(self.inbox, AtomicInbox):
            raise ConfigurationError(
                f"atomic=True handlers need an inbox that applies writes with the ack, and"
                f" {type(self.inbox).__name__} does not: use RedisInbox, or register the handler"
                " without atomic=True and make its writes idempotent (key them on"
                " event.dedup_key)"
            )
        self.handlers.append(HandlerSpec(func, statuses, tools, atomic=bool(atomic)))

    # -- aiohttp integration ------------------------------------------------------------------

    @property
    def app(self) -> web.Application:
        """The sub-application to mount: ``host.add_subapp("/hooks/", receiver.app)``.

        Routes: ``POST /`` and ``POST /{token}`` (token in path), and ``GET /metrics`` when
        ``metrics_route`` is set.  Workers start and stop with the host application.
        """
        if self._app is None:
            app = web.Application()
            app[RECEIVER_KEY] = self
            app.router.add_post("/", self._handle)
            if self.metrics_route:
                app.router.add_get("/metrics", self._metrics_view)
            app.router.add_post(f"/{{{TOKEN_PARAM}}}", self._handle)
            app.on_shutdown.append(self._on_shutdown)
            app.cleanup_ctx.append(self._lifespan)
            self._app = app
        return self._app

    def setup(self, app: web.Application, prefix: str = "/hooks/") -> web.AbstractResource:
        """Mount on ``app`` at ``prefix`` and store the receiver under ``RECEIVER_KEY``.

        With a token in the path (:class:`~webhooks.TokenVerifier`), the exact URL of each token
        is also routed on ``app`` itself, which aiohttp resolves with one dictionary lookup
        instead of going through the sub-application; every other path under ``prefix`` (an
        unknown token, ``metrics``) goes to the sub-application as before.
        """
        if not prefix.startswith("/"):
            raise ConfigurationError(f"prefix must start with '/', e.g. '/hooks/', not {prefix!r}")
        if self._mounted:
            raise ConfigurationError(
                "this receiver is mounted already; build one WebhookReceiver per application"
            )
        app[RECEIVER_KEY] = self
        mounted = app.add_subapp(prefix, self.app)
        self._mounted = True
        for token in getattr(self.verifier, "path_tokens", ()):
            params = MappingProxyType({TOKEN_PARAM: token})
            app.router.add_post(
                f"{prefix.rstrip('/')}/{token}", functools.partial(self._receive, params)
            )
        return mounted

    async def _lifespan(self, _app: web.Application) -> AsyncIterator[None]:
        await self.start()
        yield
        await self.stop()

    async def _on_shutdown(self, _app: web.Application) -> None:
        # The host stopped listening; requests still arriving on open connections get 503.
        if self._state == "running":
            self._state = "stopping"

    async def start(self) -> None:
        """Start the workers and accept deliveries (called by the host app's startup)."""
        if self._state != "new":
            raise ConfigurationError(f"a receiver starts once; this one is {self._state}")
        try:
            await self.inbox.check()
        except Exception as exc:
            logger.warning("the webhook inbox is unavailable at start (%s); answering 503", exc)
        await self._pool.start()
        self._state = "running"
        if isinstance(self.registry, RegistrySink):
            self.registry.set_healthy(True)

    async def stop(self) -> None:
        """Refuse new deliveries, drain running work within ``drain_timeout``, keep the rest.

        Safe to call more than once and concurrently (the host app's cleanup calls it too).
        """
        if self._state == "new":
            self._state = "stopped"
            return
        if self._stop_task is None:
            self._stop_task = asyncio.create_task(self._stop(), name="webhooks-stop")
        await asyncio.shield(self._stop_task)

    async def _stop(self) -> None:
        self._state = "stopping"
        if isinstance(self.registry, RegistrySink):
            self.registry.set_healthy(False)
        if self._puts:
            await asyncio.wait(set(self._puts))
        await self._pool.stop(self.drain_timeout)
        self._state = "stopped"
        if self.close_inbox:
            await self.inbox.close()

    @property
    def running(self) -> bool:
        return self._state == "running"

    # -- dead letters -------------------------------------------------------------------

    async def dead_letters(self, limit: int = 1000) -> list[InboxEntry]:
        """Entries parked after ``max_attempts`` failures, oldest first."""
        return await self.inbox.dead_letters(limit)

    async def replay(self, entry_id: str) -> None:
        """Put a dead letter back in line with a fresh attempt budget."""
        await self.inbox.replay(entry_id)
        self.metrics.replayed += 1
        self._pool.stored()

    # -- the request path ---------------------------------------------------------------

    def _refuse(self, rejection: Rejection) -> web.Response:
        self.metrics.rejected[rejection.code] += 1
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

    async def _read_body(self, request: web.Request) -> bytes | Rejection:
        content = request.content
        if content.is_eof():
            # The whole body is buffered already: nothing to wait for, so no timer.
            try:
                body = content.read_nowait()
            except (OSError, ValueError, web.HTTPException, web.RequestPayloadError) as exc:
                return Rejection(400, "bad_body", f"could not read the body: {type(exc).__name__}")
            if len(body) > self.max_body:
                return Rejection(
                    413, "too_large", f"body exceeds {self.max_body} bytes; send one event"
                )
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
                        return Rejection(
                            413, "too_large", f"body exceeds {self.max_body} bytes; send one event"
                        )
                    chunks.append(chunk)
        except TimeoutError:
            return Rejection(408, "read_timeout", "the body took too long to arrive")
        except (OSError, ValueError, web.HTTPException, web.RequestPayloadError) as exc:
            # RequestPayloadError: a body that does not decode as its Content-Encoding says.
            return Rejection(400, "bad_body", f"could not read the body: {type(exc).__name__}")
        return b"".join(chunks)

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        return await self._receive(request.match_info, request)

    async def _receive(
        self, path_params: Mapping[str, str], request: web.Request
    ) -> web.StreamResponse:
        started = time.perf_counter()
        self.metrics.received += 1
        if self._state != "running":
            return self._unavailable("stopping", "the receiver is not running; retry later")

        length = request.content_length
        if length is not None and length > self.max_body:
            return self._refuse(
                Rejection(413, "too_large", f"body exceeds {self.max_body} bytes; send one event")
            )
        content_type = request.headers.get(hdrs.CONTENT_TYPE)
        rejection = check_content_type(content_type)
        if rejection is not None:
            return self._refuse(rejection)
        body = await self._read_body(request)
        if isinstance(body, Rejection):
            return self._refuse(body)

        delivery = Delivery(
            headers=_LowerHeaders(request.headers),
            path_params=path_params,
            body=body,
        )
        rejection = self.verifier.verify(delivery)
        if rejection is not None:
            return self._refuse(rejection)

        parsed = parse_body(body)
        if isinstance(parsed, Rejection):
            return self._refuse(parsed)
        if isinstance(parsed, Ignored):
            self.metrics.ignored[parsed.code] += 1
            return self._ok("ignored", started)
        assert isinstance(parsed, Parsed)
        event = parsed.event

        if self.process_filter is not None:
            try:
                known = await self.process_filter(event.process_id)
            except Exception:
                logger.exception("the webhook process filter failed")
                return self._unavailable("filter", "could not check the process id; retry later")
            if not known:
                self.metrics.ignored["unknown_process"] += 1
                return self._ok("ignored", started)

        if self._pool.backlog >= self.queue_limit:
            return self._unavailable("queue_full", "too many events waiting; retry later")
        return await self._store(event, body, started)

    async def _store(self, event: ProcessCompleted, body: bytes, started: float) -> web.Response:
        if self._put_never_waits:
            # Its put never suspends, so neither a disconnect nor a timeout can interrupt it.
            try:
                stored = await self.inbox.put(event, body)
            except Exception as exc:
                logger.warning("the webhook inbox failed to store an event: %s", exc)
                return self._unavailable("store_unavailable", "the event store is unavailable")
            return self._stored(stored, started)
        try:
            # The write goes ahead whatever becomes of ``answer``: a client that hangs up (with
            # handler_cancellation on) or the deadline only stops this request waiting for it.
            if self._submit_put is not None:
                answer = self._submit_put(event, body)
            else:
                answer = self._put_in_task(event, body)
        except Exception as exc:
            logger.warning("the webhook inbox failed to store an event: %s", exc)
            return self._unavailable("store_unavailable", "the event store is unavailable")
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
        return self._stored(stored, started)

    def _put_in_task(self, event: ProcessCompleted, body: bytes) -> asyncio.Future[bool]:
        """Run ``inbox.put`` in a task of its own (kept until it ends) and relay its answer."""
        task = asyncio.ensure_future(self.inbox.put(event, body))
        self._puts.add(task)
        task.add_done_callback(self._puts.discard)
        answer: asyncio.Future[bool] = task.get_loop().create_future()
        task.add_done_callback(functools.partial(_relay, answer))
        return answer

    def _stored(self, stored: bool, started: float) -> web.Response:
        if stored:
            self.metrics.accepted += 1
            self._pool.stored()
            return self._ok("accepted", started)
        self.metrics.duplicate += 1
        return self._ok("duplicate", started)

    async def _metrics_view(self, _request: web.Request) -> web.Response:
        snapshot = self.metrics.snapshot()
        snapshot["backlog"] = self._pool.backlog
        snapshot["in_flight"] = self._pool.in_flight
        snapshot["state"] = self._state
        return web.json_response(snapshot)


RECEIVER_KEY: Final = web.AppKey("webhooks.receiver", WebhookReceiver)
"""Where :meth:`WebhookReceiver.setup` stores the receiver on the host app and its own app."""


class RedactingAccessLogger(AccessLogger):
    """aiohttp's access logger, with the path below a mounted receiver shown as ``***``.

    Any method and any answer: a GET of the hook URL (405) or a path with a stray trailing slash
    (404) holds the token as much as a delivery does.

    ``web.run_app(app, access_log_class=RedactingAccessLogger)`` or
    ``web.AppRunner(app, access_log_class=RedactingAccessLogger)``.
    """

    def log(self, request: web.BaseRequest, response: web.StreamResponse, time: float) -> None:
        redacted = None
        if isinstance(request, web.Request):
            with contextlib.suppress(Exception):
                redacted = _redacted_target(request)
        if redacted is not None:
            try:
                request = request.clone(rel_url=redacted)
            except RuntimeError:
                self.logger.info("webhook delivery (request line withheld: it holds a token)")
                return
        super().log(request, response, time)


def _redacted_target(request: web.Request) -> str | None:
    """The request target with everything below a receiver's mount point as ``***``, or None."""
    path = request.rel_url.raw_path
    query = request.rel_url.raw_query_string
    mounts: list[str] = []
    for app in request.match_info.apps:
        receiver = app.get(RECEIVER_KEY)
        if receiver is not None and receiver._app is app:
            mounts.append("")  # the receiver's own app serves at the root
        for resource in app.router.resources():
            if isinstance(resource, web.PrefixedSubAppResource):
                info = resource.get_info()
                if RECEIVER_KEY in info["app"]:
                    mounts.append(info["prefix"].rstrip("/"))
    for mount in mounts:
        if path.startswith(mount + "/") and len(path) > len(mount) + 1:
            return f"{mount}/***" + (f"?{query}" if query else "")
    token = request.match_info.get(TOKEN_PARAM)
    if token:
        return request.path_qs.replace(token, "***")
    return None
