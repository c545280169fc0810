"""A receiver, the mountable sub-application that receives one kind of event durably: its
options, its handlers, its life from start to drain, and its one-call constructors on a backend.

:class:`ReceiverCore` holds the handlers, builds the application and runs its
:class:`Lifecycle` for any event kind (:mod:`webhooks._kinds`); each delivery goes through its
:class:`~webhooks._intake.Intake` (verify, parse, store, answer) and each stored event through its
:class:`~webhooks._pool.WorkerPool` (handlers, retries, dead letters); its
``from_redis``/``from_postgres``/``from_backend`` build the stores on one backend and hand them to
the receiver, which closes them when it stops.  :class:`WebhookReceiver` is the core on the
service's ``process.completed`` kind, with what only that kind has: the registry (which it takes
from a backend too), fetch-back, the process filter.  :class:`~webhooks.EventReceiver` is the
core on any other sender's events.

A handler is ``async def handler(event)``, or ``async def handler(event, writes)`` with
``atomic=True``; either may take one more, required, positional parameter: a
:class:`~webhooks.DeliveryInfo`.  Which form a handler has is read from its signature once, at
registration (:func:`handler_spec`): the worker never probes a handler when it calls it.

::

    receiver = WebhookReceiver(inbox=SQLiteInbox("hooks.db"), verifier=TokenVerifier(token))

    @receiver.on_completed(status="done")
    async def publish(event: ProcessCompleted) -> None: ...

    app = web.Application()
    receiver.setup(app, prefix="/hooks/")
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from types import MappingProxyType
from typing import Any, Final, Generic, Self, TypeVar

import attrs
from aiohttp import web

from asyncsdk import ConfigurationError, ProcessCompleted
from webhooks import _server_log as server_log
from webhooks._aiohttp_intake import INTAKE_KEY, AiohttpIntake
from webhooks._backpressure import SharedDepth
from webhooks._checks import require_count, require_seconds
from webhooks._contract import (
    DEFAULT_CLAIM_TIMEOUT,
    AtomicInbox,
    Backend,
    Inbox,
    InboxEntry,
    ProcessClient,
    RegistrySink,
    ResultSink,
    StoredEvent,
    Verifier,
)
from webhooks._dispatch import BeforeHandlers, HandlerSpec, RetryPolicy, ServiceSteps, names
from webhooks._events import WebhookEvent
from webhooks._exposition import metrics_view
from webhooks._fetchback import unconfirmed
from webhooks._health import Readiness, liveness_view
from webhooks._intake import Intake, ProcessFilter
from webhooks._kinds import PROCESS_COMPLETED, EventKind
from webhooks._metrics import Metrics
from webhooks._misrouted import REST_PARAM, Misrouted
from webhooks._observe import (
    NO_RECEIVER_TELEMETRY,
    ReceiverTelemetry,
    bind_receiver_telemetry,
    receiver_telemetry,
)
from webhooks._pool import WorkerPool
from webhooks._postgres import DEFAULT_SCHEMA, PostgresBackend
from webhooks._redis import DEFAULT_PREFIX, DEFAULT_REDIS_URL, RELAXED, RedisBackend
from webhooks._store_gauges import StoreReading
from webhooks._verify import TOKEN_PARAM

__all__ = ["RECEIVER_KEY", "ReceiverCore", "WebhookReceiver"]

logger = logging.getLogger("webhooks")

H = TypeVar("H", bound=Callable[..., Awaitable[None]])
E = TypeVar("E", bound=StoredEvent)


class ReceiverCore(Generic[E]):
    """A durable webhook receiver for the events of one ``kind``: everything but the kind.

    The options are :class:`WebhookReceiver`'s, less those only the service's events have
    (``client``, ``registry``, ``process_filter``, ``fetch_timeout``, ``not_finished_delay``),
    which its subclass passes as ``admit``, ``stored_form``, ``before_handlers`` (steps typed on
    its events: :class:`~webhooks._dispatch.ServiceSteps`) and ``registry`` (started, stopped and
    counted with the receiver).
    """

    def __init__(
        self,
        *,
        inbox: Inbox,
        verifier: Verifier,
        kind: EventKind[E],
        admit: Callable[[E], Awaitable[bool]] | None = None,
        stored_form: Callable[[E], E] | None = None,
        before_handlers: BeforeHandlers[E] | None = None,
        registry: ResultSink | None = None,
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
        not_finished_delay: float = 15.0,
        metrics_route: bool = False,
        close_inbox: bool = True,
        consumer: str | None = None,
        telemetry: ReceiverTelemetry | None = None,
        metrics_token: str | None = None,
        health_routes: bool = False,
    ) -> None:
        check_receiver_options(
            inbox=inbox,
            verifier=verifier,
            counts={
                "max_body": max_body,
                "workers": workers,
                "max_attempts": max_attempts,
                "queue_limit": queue_limit,
                "retry_after": retry_after,
            },
            seconds={
                "read_timeout": read_timeout,
                "put_timeout": put_timeout,
                "handler_timeout": handler_timeout,
                "retry_base": retry_base,
                "retry_cap": retry_cap,
                "poll_interval": poll_interval,
                "not_finished_delay": not_finished_delay,
            },
            drain_timeout=drain_timeout,
        )
        telemetry = receiver_telemetry(
            telemetry, metrics_route=metrics_route, metrics_token=metrics_token
        )
        self.telemetry = telemetry or NO_RECEIVER_TELEMETRY
        self._metrics_token = metrics_token
        self.inbox = inbox
        self.verifier = verifier
        self.kind = kind
        self.max_body = max_body
        self.read_timeout = float(read_timeout)
        self.put_timeout = float(put_timeout)
        self.queue_limit = queue_limit
        self.drain_timeout = float(drain_timeout)
        self.retry_after = retry_after
        self.metrics_route = metrics_route
        self.health_routes = bool(health_routes)
        self.close_inbox = close_inbox
        self.metrics = Metrics()
        self.handlers: list[HandlerSpec] = []
        pool_options: dict[str, Any] = {} if consumer is None else {"consumer": consumer}
        self._pool: WorkerPool[E] = WorkerPool(
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
            before_handlers=before_handlers,
            poll_interval=float(poll_interval),
            telemetry=self.telemetry,
            **pool_options,
        )
        self._app: web.Application | None = None
        self._mounted = False
        self._misrouted = Misrouted(verifier=verifier)
        self._depth = SharedDepth(inbox=inbox, timeout=self.put_timeout)
        self._life = Lifecycle(
            inbox=inbox,
            registry=registry,
            pool=self._pool,
            depth=self._depth,
            drain_timeout=self.drain_timeout,
            close_inbox=close_inbox,
        )
        self._intake: Intake[E] = Intake(
            submit_put=self._pool.submit_put,
            verifier=verifier,
            metrics=self.metrics,
            kind=kind,
            admit=admit,
            stored_form=stored_form,
            max_body=max_body,
            read_timeout=self.read_timeout,
            put_timeout=self.put_timeout,
            queue_limit=queue_limit,
            retry_after=retry_after,
            is_running=lambda: self._life.state == "running",
            depth=self._depth,
            stored=self._stored,
            telemetry=self.telemetry,
        )
        self._aiohttp = AiohttpIntake(self._intake)
        if telemetry is not None:
            store = StoreReading(inbox=inbox)
            if telemetry.registry is not None:  # read only for Prometheus to scrape
                self._life.store = store
            bind_receiver_telemetry(
                telemetry,
                self.metrics,
                inbox=store.current,
                inbox_full=store.full,
                in_flight=lambda: self._pool.in_flight,
                oldest_received_at=self._pool.oldest_received_at,
                registry=registry,
            )

    def __repr__(self) -> str:
        return (
            f"<{type(self).__name__} {self._life.state} inbox={self.inbox!r}"
            f" verifier={self.verifier!r}>"
        )

    def _register(
        self,
        func: Callable[..., Awaitable[None]],
        wants: Callable[[Any], bool] | None,
        atomic: bool,
    ) -> None:
        """Register ``func`` for the events ``wants`` accepts (``None``: every event)."""
        self.handlers.append(handler_spec(func, inbox=self.inbox, wants=wants, atomic=atomic))

    def _keep_on(self, app: web.Application) -> None:
        """Store this receiver on ``app`` (its own application and, from :meth:`setup`, the
        host's) under the key its class documents; none by default."""

    # -- one node on a shared store ----------------------------------------------------------

    @classmethod
    def _stores_of(cls, backend: Backend) -> dict[str, Any]:
        """The constructor arguments ``backend`` gives a receiver of this class: its inbox (and,
        for :class:`WebhookReceiver`, its registry)."""
        return {"inbox": backend.inbox}

    @classmethod
    def from_backend(
        cls,
        backend: Backend,
        *,
        verifier: Verifier,
        handler: Callable[..., Awaitable[None]] | None = None,
        **options: Any,
    ) -> Self:
        """A receiver on ``backend``'s inbox (and, for a :class:`WebhookReceiver`, its registry:
        ``receiver.registry``, to wait on), which it owns: the backend closes when the receiver
        stops.  ``handler`` (optional) is registered for every event; ``options`` are the
        constructor's."""
        receiver = cls(verifier=verifier, **cls._stores_of(backend), **options)
        receiver._life.backend = backend
        if handler is not None:
            receiver._register(handler, None, atomic=False)
        return receiver

    @classmethod
    def from_redis(
        cls,
        url: str = DEFAULT_REDIS_URL,
        *,
        verifier: Verifier,
        handler: Callable[..., Awaitable[None]] | None = None,
        prefix: str = DEFAULT_PREFIX,
        claim_timeout: float = DEFAULT_CLAIM_TIMEOUT,
        durability: str = RELAXED,
        replicas: int = 0,
        **options: Any,
    ) -> Self:
        """One node of a group sharing Redis at ``url`` under ``prefix``: :meth:`from_backend`
        on a :class:`~webhooks.RedisBackend`, closed when the receiver stops.
        ``durability="strict"`` answers 2xx only once the delivery is on disk (or on
        ``replicas`` replicas): see :class:`~webhooks.RedisInbox`.  Give each receiver a prefix
        of its own."""
        backend = RedisBackend(
            url,
            prefix=prefix,
            claim_timeout=claim_timeout,
            durability=durability,
            replicas=replicas,
        )
        return cls.from_backend(backend, verifier=verifier, handler=handler, **options)

    @classmethod
    def from_postgres(
        cls,
        dsn: str,
        *,
        verifier: Verifier,
        handler: Callable[..., Awaitable[None]] | None = None,
        schema: str = DEFAULT_SCHEMA,
        claim_timeout: float = DEFAULT_CLAIM_TIMEOUT,
        listen_dsn: str | None = None,
        **options: Any,
    ) -> Self:
        """One node of a group sharing the PostgreSQL ``schema`` at ``dsn``: :meth:`from_backend`
        on a :class:`~webhooks.PostgresBackend`, closed when the receiver stops.  Give each
        receiver a schema of its own.  ``listen_dsn``: the registry's direct connection for
        LISTEN when ``dsn`` goes through a pooler in transaction mode (without it, the registry
        polls)."""
        backend = PostgresBackend(
            dsn, schema=schema, claim_timeout=claim_timeout, listen_dsn=listen_dsn
        )
        return cls.from_backend(backend, verifier=verifier, handler=handler, **options)

    # -- aiohttp integration ------------------------------------------------------------------

    @property
    def app(self) -> web.Application:
        """The sub-application to mount: ``host.add_subapp("/hooks/", receiver.app)``.

        Routes: ``POST /`` and ``POST /{token}`` (token in path), ``GET /metrics`` when
        ``metrics_route`` is set, and ``GET /ready`` and ``GET /live`` when ``health_routes`` is
        set; any other ``POST`` under it (a slash after the token) is answered 404 with a body
        naming the URL to deliver to, and logged once.  Workers start and stop with the host
        application.  A request aiohttp refuses before any route runs, for a
        ``Content-Encoding`` it cannot decode, is logged in one line (``webhooks._server_log``).
        """
        if self._app is None:
            server_log.install()
            app = web.Application()
            self._keep_on(app)
            app[INTAKE_KEY] = self._intake
            app.router.add_post("/", self._aiohttp.handle)
            if self.metrics_route:
                assert self.telemetry.registry is not None  # checked in __init__
                view = metrics_view(self.telemetry.registry, self._metrics_token)
                app.router.add_get("/metrics", view)
            if self.health_routes:
                readiness = Readiness(self._state, self.inbox, self.put_timeout)
                self._life.readiness = readiness
                app.router.add_get("/ready", readiness.view)
                app.router.add_get("/live", liveness_view())
            app.router.add_post(f"/{{{TOKEN_PARAM}}}", self._aiohttp.handle)
            # Anything else under the prefix (a slash after the token): a 404 naming the URL.
            app.router.add_post(f"/{{{REST_PARAM}:.+}}", self._misrouted.past_the_token)
            app.on_shutdown.append(self._on_shutdown)
            app.cleanup_ctx.append(self._lifespan)
            self._app = app
        return self._app

    def setup(self, app: web.Application, prefix: str = "/hooks/") -> web.AbstractResource:
        """Mount on ``app`` at ``prefix`` (and, for a :class:`WebhookReceiver`, store it under
        ``RECEIVER_KEY``).  Several receivers mount side by side under different prefixes.

        With a token in the path (:class:`~webhooks.TokenVerifier`), the exact URL of each token
        is also routed on ``app`` itself, which aiohttp resolves with one dictionary lookup
        instead of going through the sub-application, and a delivery on it is verified once,
        with its body (the route itself shows the token is one the verifier lists); every other
        path under ``prefix`` (an unknown token, ``metrics``) goes to the sub-application, where
        a path token is checked before the body is read.  A ``POST`` to the prefix without its
        trailing slash (``/hooks``) is answered 404 with a body naming the URL to deliver to
        (``/hooks/<token>``), and logged once: a sender retries it until its URL is fixed.
        """
        if not prefix.startswith("/"):
            raise ConfigurationError(f"prefix must start with '/', e.g. '/hooks/', not {prefix!r}")
        if self._mounted:
            raise ConfigurationError(
                "this receiver is mounted already; build one receiver per application"
            )
        self._keep_on(app)
        if prefix != "/":  # the prefix without its slash: a 404 naming the URL, not a bare one
            app.router.add_post(prefix.rstrip("/"), self._misrouted.slashless)
        mounted = app.add_subapp(prefix, self.app)
        self._mounted = True
        for token in self.verifier.path_tokens:
            params = MappingProxyType({TOKEN_PARAM: token})
            app.router.add_post(
                f"{prefix.rstrip('/')}/{token}",
                functools.partial(self._aiohttp.receive, params, token_routed=True),
            )
        return mounted

    async def _lifespan(self, _app: web.Application) -> AsyncIterator[None]:
        await self.start()
        yield
        await self.stop()

    async def _on_shutdown(self, _app: web.Application) -> None:
        self._life.shutdown_began()

    async def start(self) -> None:
        """Start the workers and accept deliveries (called by the host app's startup)."""
        await self._life.start()

    async def stop(self) -> None:
        """Refuse new deliveries (503 with ``Retry-After``), let running work finish within
        ``drain_timeout``, hand back the rest, close what the receiver owns.

        A handler still running after ``drain_timeout`` is cancelled and its entry handed back
        to the inbox at once, unacked: another node, or the next start, runs it again (its
        ``atomic=True`` writes, which commit only with the ack, apply once).

        Safe to call more than once and concurrently (the host app's cleanup calls it too).
        """
        await self._life.stop()

    async def drained(self) -> None:
        """Return once the receiver has stopped (the host app's shutdown, or :meth:`stop`):
        deliveries answered ``503`` with ``Retry-After`` since the shutdown began, every entry it
        held finished or handed back to the inbox for another node, its stores closed."""
        await self._life.drained()

    def _state(self) -> str:
        return self._life.state

    @property
    def running(self) -> bool:
        """Whether the receiver is started and not stopping: deliveries are accepted."""
        return self._life.state == "running"

    # -- dead letters -------------------------------------------------------------------

    async def dead_letters(self, limit: int = 1000) -> list[InboxEntry]:
        """Entries parked after ``max_attempts`` failures, oldest first."""
        return await self.inbox.dead_letters(limit)

    async def replay(self, entry_id: str) -> None:
        """Put a dead letter back in line with a fresh attempt budget."""
        await self.inbox.replay(entry_id)
        self.metrics.replayed += 1
        self._stored()

    def _stored(self) -> None:
        self._depth.stored()
        self._pool.stored()


class WebhookReceiver(ReceiverCore[ProcessCompleted]):
    """Receives ``process.completed`` deliveries, stores them, and runs handlers from the store.

    Required: ``inbox`` (where accepted events live until handled: :class:`~webhooks.SQLiteInbox`,
    :class:`~webhooks.MemoryInbox`, :class:`~webhooks.RedisInbox`,
    :class:`~webhooks.PostgresInbox`) and ``verifier`` (who may deliver:
    :class:`~webhooks.TokenVerifier`, :class:`~webhooks.StandardWebhooksVerifier`, or
    :class:`~webhooks.NoVerification` together with fetch-back).

    ``client``: fetch-back; every delivery is checked with ``client.orders.get`` (the order it
    names must list the process; only then does it claim the event's dedup key) and confirmed
    with ``client.processes.get`` before the registry and handlers see it, and they get the
    API's answer (an event the API still calls unfinished is asked about again after
    ``not_finished_delay`` seconds).  ``registry``: told
    about each event before handlers (and ``set_healthy`` on start/stop).  ``process_filter``:
    an async predicate (e.g. :class:`~webhooks.KnownProcessFilter`) dropping unknown process ids.

    Limits: ``max_body`` bytes per request (413 past it), ``read_timeout`` for the body (408),
    ``put_timeout`` for the store (503), ``queue_limit`` unfinished events in the shared inbox
    (every process's, as :meth:`~webhooks.Inbox.pending_count` counts them) before answering 503,
    ``workers`` concurrent entries, ``handler_timeout`` per handler, ``max_attempts`` hand-outs
    before dead letter, ``drain_timeout`` at shutdown.  ``retry_after`` is the ``Retry-After`` of
    503 answers.  ``close_inbox``: close the inbox when the receiver stops.

    ``telemetry``: a :class:`~webhooks.ReceiverTelemetry` for Prometheus metrics and
    OpenTelemetry spans (none by default).  ``metrics_route=True`` serves the metrics at
    ``GET <prefix>metrics`` to scrapers that send ``Authorization: Bearer <metrics_token>``
    (both required; the route is off by default).

    ``health_routes=True`` serves an orchestrator's probes (off by default): ``GET
    <prefix>ready`` answers 200 while the receiver runs and its inbox answers
    :meth:`~webhooks.Inbox.check` within ``put_timeout``, and 503 from the moment its drain
    begins and while the store is down or does not answer; ``GET <prefix>live`` answers 200
    whenever the process serves it, draining included.
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
        telemetry: ReceiverTelemetry | None = None,
        metrics_token: str | None = None,
        health_routes: bool = False,
    ) -> None:
        self.client = client
        self.registry = registry
        self.process_filter = process_filter
        fetch_seconds = require_seconds("fetch_timeout", fetch_timeout, zero_ok=False)
        service_steps = (
            None
            if client is None and registry is None
            else ServiceSteps(client=client, sink=registry, fetch_timeout=fetch_seconds)
        )
        super().__init__(
            inbox=inbox,
            verifier=verifier,
            kind=PROCESS_COMPLETED,
            admit=None if process_filter is None else _ProcessAdmission(process_filter),
            # With fetch-back, a delivery is stored unconfirmed, for the workers to check.
            stored_form=None if client is None else unconfirmed,
            before_handlers=service_steps,
            registry=registry,
            max_body=max_body,
            read_timeout=read_timeout,
            put_timeout=put_timeout,
            workers=workers,
            handler_timeout=handler_timeout,
            max_attempts=max_attempts,
            retry_base=retry_base,
            retry_cap=retry_cap,
            queue_limit=queue_limit,
            drain_timeout=drain_timeout,
            retry_after=retry_after,
            poll_interval=poll_interval,
            not_finished_delay=not_finished_delay,
            metrics_route=metrics_route,
            close_inbox=close_inbox,
            consumer=consumer,
            telemetry=telemetry,
            metrics_token=metrics_token,
            health_routes=health_routes,
        )

    def _keep_on(self, app: web.Application) -> None:
        app[RECEIVER_KEY] = self

    @classmethod
    def _stores_of(cls, backend: Backend) -> dict[str, Any]:
        return {"inbox": backend.inbox, "registry": backend.registry}

    # -- handlers -------------------------------------------------------------------------

    def on_completed(
        self,
        *,
        status: str | Iterable[str] | None = None,
        tool: str | Iterable[str] | None = None,
        atomic: bool = False,
    ) -> Callable[[H], H]:
        """Register an ``async def handler(event: ProcessCompleted)`` for matching events.

        ``status`` / ``tool`` restrict it to those values (a string or several); by default it
        gets every event.  Handlers run in the worker, never on the request path.

        ``atomic=True``: the handler is ``async def handler(event, writes)`` and queues its
        writes on ``writes`` (a :class:`~webhooks.RedisWrites` with :class:`~webhooks.RedisInbox`,
        a :class:`~webhooks.PostgresWrites` with :class:`~webhooks.PostgresInbox`) instead of
        writing; the inbox applies them together with the ack, so they happen once per event
        even if the process dies between the handler and the ack.

        A handler that takes one more required parameter, ``async def handler(event, info)``
        (``(event, writes, info)`` with ``atomic=True``), gets a :class:`~webhooks.DeliveryInfo`
        there: ``info.attempt`` is 1 on the first hand-out.  The form is read from the signature
        here, once.
        """
        statuses = names(status, "status")
        tools = names(tool, "tool")

        def register(func: H) -> H:
            self.add_handler(func, statuses=statuses, tools=tools, atomic=atomic)
            return func

        return register

    def add_handler(
        self,
        func: Callable[..., Awaitable[None]],
        *,
        statuses: frozenset[str] | None = None,
        tools: frozenset[str] | None = None,
        atomic: bool = False,
    ) -> None:
        """:meth:`on_completed` without the decorator (``statuses`` / ``tools``: ``None`` for
        any)."""
        wants = None if statuses is None and tools is None else ProcessMatch(statuses, tools)
        self._register(func, wants, atomic)


class _ProcessAdmission:
    """The service's process filter, asked about an event's process id."""

    __slots__ = ("_filter",)

    def __init__(self, process_filter: ProcessFilter) -> None:
        self._filter = process_filter

    async def __call__(self, event: ProcessCompleted) -> bool:
        return await self._filter(event.process_id)


RECEIVER_KEY: Final = web.AppKey("webhooks.receiver", WebhookReceiver)
"""Where :meth:`WebhookReceiver.setup` stores the receiver on the host app and its own app."""


@attrs.define(kw_only=True, eq=False)
class Lifecycle:
    """Starts and stops one receiver's pool and closes its stores.

    ``new -> running -> stopping -> stopped``.  While ``stopping`` every delivery is answered 503
    with ``Retry-After`` (another node, or this one restarted, takes it), the workers finish what
    they run within ``drain_timeout`` and hand back what they hold; then the inbox
    (``close_inbox``) and a backend the receiver owns are closed, and :meth:`drained` returns.
    """

    inbox: Inbox
    registry: ResultSink | None
    pool: WorkerPool[Any]
    depth: SharedDepth
    drain_timeout: float
    close_inbox: bool
    backend: Backend | None = None
    """Inbox and registry the receiver owns (built by ``from_redis``/``from_postgres``)."""
    store: StoreReading | None = None
    """The shared inbox's figures for the metrics, read while running (when metrics are on)."""
    readiness: Readiness | None = None
    """The readiness route (with ``health_routes``), whose store check ends with the receiver."""
    state: str = attrs.field(default="new", init=False)
    _stop_task: asyncio.Task[None] | None = attrs.field(default=None, init=False)
    _stopped: asyncio.Event = attrs.field(factory=asyncio.Event, init=False)

    def shutdown_began(self) -> None:
        """The host's ``on_shutdown``: aiohttp has closed its listening sockets and asked its
        idle connections to close; a delivery still arriving on an open one gets 503 with
        ``Retry-After``, and the readiness route 503.  The workers go on until the cleanup
        (:meth:`stop`)."""
        if self.state == "running":
            self.state = "stopping"

    async def start(self) -> None:
        if self.state != "new":
            raise ConfigurationError(f"a receiver starts once; this one is {self.state}")
        try:
            await self.inbox.check()
        except ConfigurationError:
            raise  # a store that cannot keep the inbox's promise (RedisInbox's strict mode)
        except Exception as exc:
            logger.error(
                "the webhook inbox %r cannot be reached at start (%s): every delivery is answered"
                " 503 (its sender retries it: nothing is lost) until it can; start the store, or"
                " fix the address the inbox was given",
                self.inbox,
                exc,
            )
        await self.pool.start()
        if self.store is not None:
            self.store.start()
        self.state = "running"
        if isinstance(self.registry, RegistrySink):
            self.registry.set_healthy(True)

    async def stop(self) -> None:
        if self.state == "new":
            self.state = "stopped"
            await self._close()
            return
        if self._stop_task is None:
            self._stop_task = asyncio.create_task(self._stop(), name="webhooks-stop")
        await asyncio.shield(self._stop_task)

    async def _stop(self) -> None:
        self.state = "stopping"
        if isinstance(self.registry, RegistrySink):
            self.registry.set_healthy(False)
        await self.pool.stop(self.drain_timeout)
        if self.store is not None:
            await self.store.stop()
        if self.readiness is not None:
            self.readiness.stop()
        self.state = "stopped"
        await self.depth.close()
        await self._close()

    async def _close(self) -> None:
        try:
            if self.close_inbox:
                await self.inbox.close()
            if self.backend is not None:
                await self.backend.close()
        finally:
            self._stopped.set()

    async def drained(self) -> None:
        await self._stopped.wait()


def check_receiver_options(
    *,
    inbox: object,
    verifier: object,
    counts: dict[str, object],
    seconds: dict[str, float],
    drain_timeout: float,
) -> None:
    """Raise :class:`~asyncsdk.ConfigurationError` naming the first argument that is wrong.

    ``counts`` must be positive integers and ``seconds`` positive numbers of seconds, by name.
    """
    if not isinstance(inbox, Inbox):
        raise ConfigurationError(
            "inbox must implement webhooks.Inbox; use SQLiteInbox(path) or MemoryInbox()"
        )
    if not isinstance(verifier, Verifier):
        raise ConfigurationError(
            "verifier must have verify(delivery) and path_tokens; use TokenVerifier(token), "
            "StandardWebhooksVerifier(secret) or NoVerification() with fetch-back"
        )
    for name, number in counts.items():
        require_count(name, number, minimum=1)
    for name, value in seconds.items():
        require_seconds(name, value, zero_ok=False)
    require_seconds("drain_timeout", drain_timeout, zero_ok=True)
    if seconds["read_timeout"] + seconds["put_timeout"] >= 10:
        raise ConfigurationError(
            "read_timeout + put_timeout must stay under 10 s: the service wants a 2xx "
            "within 10 seconds"
        )


_POSITIONAL = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)


def handler_spec(
    func: Callable[..., Any],
    *,
    inbox: Inbox,
    wants: Callable[[Any], bool] | None,
    atomic: bool,
) -> HandlerSpec:
    """The :class:`HandlerSpec` of ``func``, or :class:`~asyncsdk.ConfigurationError` naming the
    fix."""
    if not callable(func):
        raise ConfigurationError("a handler must be an async function taking the event")
    if atomic and not isinstance(inbox, AtomicInbox):
        raise ConfigurationError(
            f"atomic=True handlers need an inbox that applies writes with the ack, and"
            f" {type(inbox).__name__} does not: use RedisInbox or PostgresInbox, or"
            " register the handler without atomic=True and make its writes idempotent: key"
            " them on event.dedup_key, the key the inbox deduplicates on (a tuple of strings;"
            " ':'.join(event.dedup_key) is one string)"
        )
    fixed = 2 if atomic else 1
    return HandlerSpec(func, wants, atomic=bool(atomic), with_info=_takes_info(func, fixed, atomic))


@attrs.frozen
class ProcessMatch:
    """The ``process.completed`` events a handler wants: these statuses and tools (``None``:
    any)."""

    statuses: frozenset[str] | None
    tools: frozenset[str] | None

    def __call__(self, event: ProcessCompleted) -> bool:
        return (self.statuses is None or event.status in self.statuses) and (
            self.tools is None or event.tool in self.tools
        )


@attrs.frozen
class TypeMatch:
    """The events of other senders a handler wants: these types."""

    types: frozenset[str]

    def __call__(self, event: WebhookEvent) -> bool:
        return event.type in self.types


def _takes_info(func: Callable[..., Any], fixed: int, atomic: bool) -> bool:
    """Whether ``func`` takes a :class:`~webhooks.DeliveryInfo` after its ``fixed`` parameters."""
    try:
        parameters = inspect.signature(func).parameters.values()
    except (TypeError, ValueError):  # a builtin or extension callable without a signature
        return False
    if any(p.kind is inspect.Parameter.VAR_POSITIONAL for p in parameters):
        return False  # takes what it is given: the fixed parameters only
    positional = [p for p in parameters if p.kind in _POSITIONAL]
    required = [p for p in positional if p.default is inspect.Parameter.empty]
    if len(required) > fixed + 1 or len(positional) < fixed:
        kind, forms = (
            ("an atomic=True handler", "(event, writes) or (event, writes, info)")
            if atomic
            else ("a handler", "(event) or (event, info)")
        )
        raise ConfigurationError(
            f"{kind} takes {forms}, and {func!r} takes {len(positional)} positional parameter(s)"
        )
    # An optional parameter past the fixed ones keeps its default, as before DeliveryInfo.
    return len(required) > fixed
