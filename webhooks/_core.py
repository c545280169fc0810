"""The receiver core: :class:`ReceiverCore`, the mountable sub-application that receives one
kind of event durably (its handlers, routes, mounting, start and stop), and its one-call
constructors on a shared store.

Each delivery goes through its :class:`~webhooks._intake.Intake` (verify, parse, store, answer)
and each stored event through its :class:`~webhooks._pool.WorkerPool` (handlers, retries, dead
letters); its :class:`~webhooks._lifecycle.Lifecycle` starts and drains them.
:class:`~webhooks.WebhookReceiver` is the core on the service's ``process.completed`` kind,
:class:`~webhooks.EventReceiver` on any other sender's.
"""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator, Awaitable, Callable
from types import MappingProxyType
from typing import Any, Generic, Self, TypeVar, Unpack

from aiohttp import web

from asyncsdk import ConfigurationError
from webhooks import _server_log as server_log
from webhooks._aiohttp_intake import INTAKE_KEY, AiohttpIntake
from webhooks._backpressure import SharedDepth
from webhooks._contract import (
    DEFAULT_CLAIM_TIMEOUT,
    Backend,
    Inbox,
    InboxEntry,
    StoredEvent,
    Verifier,
)
from webhooks._dispatch import BeforeHandlers, HandlerSpec, RetryPolicy
from webhooks._handlers import handler_spec
from webhooks._health import Readiness, liveness_view
from webhooks._intake import Intake
from webhooks._kinds import EventKind
from webhooks._lifecycle import Lifecycle
from webhooks._misrouted import REST_PARAM, Misrouted
from webhooks._observability.counters import Metrics
from webhooks._observability.exposition import metrics_view
from webhooks._observability.store_gauges import StoreReading
from webhooks._observability.telemetry import (
    NO_RECEIVER_TELEMETRY,
    bind_receiver_telemetry,
    receiver_telemetry,
)
from webhooks._options import ReceiverOptions
from webhooks._pool import WorkerPool
from webhooks._postgres import DEFAULT_SCHEMA, PostgresBackend
from webhooks._redis import DEFAULT_PREFIX, DEFAULT_REDIS_URL, RELAXED, RedisBackend
from webhooks._verify import TOKEN_PARAM

__all__ = ["ReceiverCore", "check_stores"]

E = TypeVar("E", bound=StoredEvent)


class ReceiverCore(Generic[E]):
    """A durable webhook receiver for the events of one ``kind``: everything but the kind.

    ``options``: every :class:`~webhooks._options.ReceiverOptions`, checked by its subclass
    (:func:`~webhooks._options.receiver_options`, which names the public class).  What only
    the service's events have the subclass turns into ``admit``, ``stored_form`` and
    ``before_handlers`` (steps typed on its events: :class:`~webhooks._dispatch.ServiceSteps`);
    ``options["registry"]`` is started, stopped and counted with the receiver.
    """

    def __init__(
        self,
        *,
        inbox: Inbox,
        verifier: Verifier,
        kind: EventKind[E],
        options: ReceiverOptions,
        admit: Callable[[E], Awaitable[bool]] | None = None,
        stored_form: Callable[[E], E] | None = None,
        before_handlers: BeforeHandlers[E] | None = None,
    ) -> None:
        check_stores(inbox, verifier)
        registry = options["registry"]
        metrics_route, metrics_token = options["metrics_route"], options["metrics_token"]
        telemetry = receiver_telemetry(
            options["telemetry"], metrics_route=metrics_route, metrics_token=metrics_token
        )
        self.telemetry = telemetry or NO_RECEIVER_TELEMETRY
        self._metrics_token = metrics_token
        self.inbox = inbox
        self.verifier = verifier
        self.kind = kind
        self.max_body = options["max_body"]
        self.read_timeout = float(options["read_timeout"])
        self.put_timeout = float(options["put_timeout"])
        self.queue_limit = options["queue_limit"]
        self.drain_timeout = float(options["drain_timeout"])
        self.retry_after = options["retry_after"]
        self.metrics_route = metrics_route
        self.health_routes = bool(options["health_routes"])
        self.close_inbox = options["close_inbox"]
        self.metrics = Metrics()
        self.handlers: list[HandlerSpec] = []
        consumer = options["consumer"]
        pool_options: dict[str, Any] = {} if consumer is None else {"consumer": consumer}
        self._pool: WorkerPool[E] = WorkerPool(
            inbox=inbox,
            handlers=self.handlers,
            metrics=self.metrics,
            workers=options["workers"],
            handler_timeout=float(options["handler_timeout"]),
            retry=RetryPolicy(
                max_attempts=options["max_attempts"],
                base=options["retry_base"],
                cap=options["retry_cap"],
                not_finished_delay=options["not_finished_delay"],
            ),
            before_handlers=before_handlers,
            poll_interval=float(options["poll_interval"]),
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
            close_inbox=self.close_inbox,
        )
        self._intake: Intake[E] = Intake(
            submit_put=self._pool.submit_put,
            verifier=verifier,
            metrics=self.metrics,
            kind=kind,
            admit=admit,
            stored_form=stored_form,
            max_body=self.max_body,
            read_timeout=self.read_timeout,
            put_timeout=self.put_timeout,
            queue_limit=self.queue_limit,
            retry_after=self.retry_after,
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
        **options: Unpack[ReceiverOptions],
    ) -> Self:
        """A receiver on ``backend``'s inbox (and, for a :class:`WebhookReceiver`, its registry:
        ``receiver.registry``, to wait on), which it owns: the backend closes when the receiver
        stops.  ``handler`` (optional) is registered for every event; ``options`` are the
        constructor's."""
        arguments: dict[str, Any] = {**cls._stores_of(backend), **options}
        receiver = cls(verifier=verifier, **arguments)
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
        **options: Unpack[ReceiverOptions],
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
        **options: Unpack[ReceiverOptions],
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


def check_stores(inbox: object, verifier: object) -> None:
    """Raise :class:`~asyncsdk.ConfigurationError` naming the fix for an ``inbox`` or a
    ``verifier`` that is not one."""
    if not isinstance(inbox, Inbox):
        raise ConfigurationError(
            "inbox must implement webhooks.Inbox; use SQLiteInbox(path) or MemoryInbox()"
        )
    if not isinstance(verifier, Verifier):
        raise ConfigurationError(
            "verifier must have verify(delivery) and path_tokens; use TokenVerifier(token), "
            "StandardWebhooksVerifier(secret) or NoVerification() with fetch-back"
        )
