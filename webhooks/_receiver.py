"""The service's receiver: :class:`WebhookReceiver`, the receiver core on ``process.completed``
events, with what only they have (fetch-back, the registry, the process filter) and handlers by
status and tool.

A handler is ``async def handler(event)``, or ``async def handler(event, writes)`` with
``atomic=True``; either may take one more, required, positional parameter: a
:class:`~webhooks.DeliveryInfo`.  Which form a handler has is read from its signature once, at
registration (:func:`~webhooks._handlers.handler_spec`): the worker never probes a handler when
it calls it.

::

    receiver = WebhookReceiver(inbox=SQLiteInbox("hooks.db"), verifier=TokenVerifier(token))

    @receiver.on_completed(status="done")
    async def publish(event: ProcessCompleted) -> None: ...

    app = web.Application()
    receiver.setup(app, prefix="/hooks/")
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from typing import Any, Final, TypeVar, Unpack

from aiohttp import web

from asyncsdk import ProcessCompleted
from webhooks._contract import Backend, Inbox, Verifier
from webhooks._core import ReceiverCore
from webhooks._dispatch import ServiceSteps, names
from webhooks._fetchback import unconfirmed
from webhooks._handlers import ProcessMatch
from webhooks._intake import ProcessFilter
from webhooks._kinds import PROCESS_COMPLETED
from webhooks._options import ReceiverOptions, receiver_options

__all__ = ["RECEIVER_KEY", "WebhookReceiver"]

H = TypeVar("H", bound=Callable[..., Awaitable[None]])


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
    503 answers.  ``close_inbox``: close the inbox when the receiver stops.  Every option, its
    type and default: :class:`~webhooks.ReceiverOptions`; one it does not take is a
    :class:`~asyncsdk.ConfigurationError` naming the nearest it does.

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
        self, *, inbox: Inbox, verifier: Verifier, **options: Unpack[ReceiverOptions]
    ) -> None:
        checked = receiver_options(type(self).__name__, dict(options))
        self.client = client = checked["client"]
        self.registry = registry = checked["registry"]
        self.process_filter = process_filter = checked["process_filter"]
        service_steps = (
            None
            if client is None and registry is None
            else ServiceSteps(client=client, sink=registry, fetch_timeout=checked["fetch_timeout"])
        )
        super().__init__(
            inbox=inbox,
            verifier=verifier,
            kind=PROCESS_COMPLETED,
            options=checked,
            admit=None if process_filter is None else _ProcessAdmission(process_filter),
            # With fetch-back, a delivery is stored unconfirmed, for the workers to check.
            stored_form=None if client is None else unconfirmed,
            before_handlers=service_steps,
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
