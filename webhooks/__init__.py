"""A durable webhook inbox: receive webhooks without losing one, the service's and any sender's.

Mount a receiver in an aiohttp app; it verifies each delivery, stores it durably in an
:class:`Inbox` (atomic dedup) before answering 2xx, and runs handlers from the inbox in a worker
pool with retries and dead letters.  :class:`WebhookReceiver` receives the service's
``process.completed`` events (dedup on (event, process_id, status)), with the registry and
fetch-back; :class:`EventReceiver` receives any other sender's as :class:`WebhookEvent` values
(dedup on the sender's message id, ``webhook-id`` for Standard Webhooks senders).
"""

import types

from webhooks._access_log import RedactingAccessLogger
from webhooks._contract import (
    AtomicInbox,
    Backend,
    ClaimingInbox,
    Delivery,
    DeliveryInfo,
    Ignored,
    Inbox,
    InboxEntry,
    InboxStats,
    InspectableInbox,
    Parsed,
    ProcessClient,
    RegistrySink,
    Rejection,
    ResultSink,
    Verifier,
)
from webhooks._dispatch import AtomicHandler, Handler
from webhooks._errors import (
    InboxError,
    InboxUnavailableError,
    RegistryClosedError,
    RegistryUnavailableError,
    UnknownEntryError,
)
from webhooks._event_receiver import EventReceiver
from webhooks._events import WebhookEvent
from webhooks._fetchback import KnownProcessFilter
from webhooks._memory import MemoryInbox
from webhooks._observability.counters import LatencyHistogram, Metrics
from webhooks._observability.exposition import metrics_app
from webhooks._observability.telemetry import ReceiverTelemetry, describe_event
from webhooks._options import ReceiverOptions
from webhooks._parse import parse_delivery
from webhooks._postgres import PostgresBackend, PostgresInbox, PostgresRegistry, PostgresWrites
from webhooks._receiver import RECEIVER_KEY, WebhookReceiver
from webhooks._redis import RedisBackend, RedisInbox, RedisRegistry, RedisWrites
from webhooks._registry import (
    Registry,
    RegistryStats,
)
from webhooks._sqlite import SQLiteInbox
from webhooks._verify import NoVerification, StandardWebhooksVerifier, TokenVerifier

__all__ = [
    "RECEIVER_KEY",
    "AtomicHandler",
    "AtomicInbox",
    "Backend",
    "ClaimingInbox",
    "Delivery",
    "DeliveryInfo",
    "EventReceiver",
    "Handler",
    "Ignored",
    "Inbox",
    "InboxEntry",
    "InboxError",
    "InboxStats",
    "InboxUnavailableError",
    "InspectableInbox",
    "KnownProcessFilter",
    "LatencyHistogram",
    "MemoryInbox",
    "Metrics",
    "NoVerification",
    "Parsed",
    "PostgresBackend",
    "PostgresInbox",
    "PostgresRegistry",
    "PostgresWrites",
    "ProcessClient",
    "ReceiverOptions",
    "ReceiverTelemetry",
    "RedactingAccessLogger",
    "RedisBackend",
    "RedisInbox",
    "RedisRegistry",
    "RedisWrites",
    "Registry",
    "RegistryClosedError",
    "RegistrySink",
    "RegistryStats",
    "RegistryUnavailableError",
    "Rejection",
    "ResultSink",
    "SQLiteInbox",
    "StandardWebhooksVerifier",
    "TokenVerifier",
    "UnknownEntryError",
    "Verifier",
    "WebhookEvent",
    "WebhookReceiver",
    "describe_event",
    "metrics_app",
    "parse_delivery",
]


def _show_public_names() -> None:
    """Give every exported class (and function) ``webhooks`` as its module, so that tracebacks,
    reprs and the reference show the name users import (``webhooks.InboxError``).

    No class of this package is structured from its annotations, so they stay unresolved.
    """
    for name in __all__:
        value = globals()[name]
        if isinstance(value, type | types.FunctionType):
            value.__module__ = __name__


_show_public_names()
