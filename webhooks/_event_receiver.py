"""The receiver of any sender's webhooks: :class:`EventReceiver`, the durable core on generic
events (:class:`~webhooks.WebhookEvent`), with handlers by event type.

::

    receiver = EventReceiver(inbox=SQLiteInbox("stripe.db"), verifier=StandardWebhooksVerifier(s))

    @receiver.on("invoice.paid")
    async def paid(event: WebhookEvent) -> None: ...

    receiver.setup(app, prefix="/stripe/")
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from typing import TypeVar, Unpack

from asyncsdk import ConfigurationError
from webhooks._contract import Inbox, Verifier
from webhooks._core import ReceiverCore
from webhooks._dispatch import names
from webhooks._events import WebhookEvent
from webhooks._handlers import TypeMatch
from webhooks._kinds import DEFAULT_ID_HEADERS, DEFAULT_TIMESTAMP_HEADERS, SenderEvents
from webhooks._options import SERVICE_ONLY, ReceiverOptions, receiver_options

__all__ = ["EventReceiver"]

H = TypeVar("H", bound=Callable[..., Awaitable[None]])


class EventReceiver(ReceiverCore[WebhookEvent]):
    """Receives any sender's webhooks with the guarantees of :class:`~webhooks.WebhookReceiver`:
    each delivery verified, then stored durably in ``inbox`` (deduplicated on the sender's
    message id) before the 2xx; handlers run from the inbox by a worker pool, at least once (or
    ``atomic=True``), with retries and dead letters; the same metrics, spans and access log.

    Each delivery becomes a :class:`~webhooks.WebhookEvent`.  By default it is read as the
    Standard Webhooks specification sends it (Svix, and every sender that follows it): the
    message id from ``webhook-id`` (or ``svix-id``), the timestamp from ``webhook-timestamp``
    (or ``svix-timestamp``), the type from the body's ``type``.  Another sender: name its headers,
    ``id_header`` (required to be present: deliveries are deduplicated on it),
    ``timestamp_header`` (``None``: the sender sends none) and ``type_header`` (the type from
    that header instead of the body), e.g. GitHub's ``id_header="x-github-delivery",
    timestamp_header=None, type_header="x-github-event"``.

    ``verifier``: who may deliver (:class:`~webhooks.StandardWebhooksVerifier`, or your own
    :class:`~webhooks.Verifier` for another signing scheme).  ``options``: the limits and
    settings of :class:`~webhooks.ReceiverOptions` (``max_body``, ``put_timeout``, ``workers``,
    ``handler_timeout``, ``max_attempts``, ``queue_limit``, ``drain_timeout``, ``telemetry``,
    ``metrics_route``, ``health_routes``...), less those only the service's events have
    (``client``, ``registry``, ``process_filter``, ``fetch_timeout``, ``not_finished_delay``).

    One node of a group on a shared store, in one call: :meth:`from_redis`,
    :meth:`from_postgres` or :meth:`from_backend` build the inbox (on a prefix or schema of this
    receiver's own, never the service receiver's) and close it when the receiver stops.
    """

    def __init__(
        self,
        *,
        inbox: Inbox,
        verifier: Verifier,
        id_header: str | Iterable[str] = DEFAULT_ID_HEADERS,
        timestamp_header: str | Iterable[str] | None = DEFAULT_TIMESTAMP_HEADERS,
        type_header: str | None = None,
        **options: Unpack[ReceiverOptions],
    ) -> None:
        for only_theirs in SERVICE_ONLY:
            if only_theirs in options:
                raise ConfigurationError(
                    f"{only_theirs}= is for the service's process.completed events: give it to"
                    " WebhookReceiver, and mount both receivers side by side"
                )
        checked = receiver_options(type(self).__name__, dict(options))
        if type_header is not None and not (isinstance(type_header, str) and type_header):
            raise ConfigurationError("type_header must be a header name or None")
        kind = SenderEvents(
            id_headers=_header_names(id_header, "id_header"),
            timestamp_headers=(
                ()
                if timestamp_header is None
                else _header_names(timestamp_header, "timestamp_header")
            ),
            type_header=type_header,
        )
        super().__init__(inbox=inbox, verifier=verifier, kind=kind, options=checked)

    def on(self, *types: str, atomic: bool = False) -> Callable[[H], H]:
        """Register an ``async def handler(event: WebhookEvent)`` for the events of these types
        (one or more: ``@receiver.on("invoice.paid", "invoice.voided")``).

        ``atomic=True`` and a :class:`~webhooks.DeliveryInfo` parameter work as for
        :meth:`~webhooks.WebhookReceiver.on_completed`.  A type nobody handles is stored and
        acked all the same (register :meth:`on_any` to see every event).
        """
        wanted = names(types, "an event type (or use on_any())")
        assert wanted is not None  # a tuple, never None

        def register(func: H) -> H:
            self._register(func, TypeMatch(wanted), atomic)
            return func

        return register

    def on_any(self, *, atomic: bool = False) -> Callable[[H], H]:
        """Register an ``async def handler(event: WebhookEvent)`` for every event."""

        def register(func: H) -> H:
            self._register(func, None, atomic)
            return func

        return register

    def add_handler(
        self,
        func: Callable[..., Awaitable[None]],
        *,
        types: Iterable[str] | None = None,
        atomic: bool = False,
    ) -> None:
        """:meth:`on` (``types``) or :meth:`on_any` (``types=None``) without the decorator."""
        wanted = names(types, "an event type")
        self._register(func, None if wanted is None else TypeMatch(wanted), atomic)


def _header_names(value: str | Iterable[str], what: str) -> tuple[str, ...]:
    """Header names in the order given (the first present is read), checked."""
    given = (value,) if isinstance(value, str) else tuple(value)
    names(given, what)  # ConfigurationError for none, or for one that is not a non-empty string
    return given
