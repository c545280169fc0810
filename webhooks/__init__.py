"""A durable webhook inbox: receive webhooks without losing one, the service's and any sender's.

Mount a receiver in an aiohttp app; it verifies each delivery, stores it durably in an
:class:`Inbox` (atomic dedup) before answering 2xx, and runs handlers from the inbox in a worker
pool with retries and dead letters.  :class:`WebhookReceiver` receives the service's
``process.completed`` events (dedup on (event, process_id, status)), with the registry and
fetch-back; :class:`EventReceiver` receives any other sender's as :class:`WebhookEvent` values
(dedup on the sender's message id, ``webhook-id`` for Standard Webhooks senders).
"""

import types
import typing
import warnings

from webhooks import contract
from webhooks._access_log import RedactingAccessLogger
from webhooks._contract import (
    Delivery,
    DeliveryInfo,
    Inbox,
    InboxEntry,
    InboxStats,
    Rejection,
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
    "Delivery",
    "DeliveryInfo",
    "EventReceiver",
    "Handler",
    "Inbox",
    "InboxEntry",
    "InboxError",
    "InboxStats",
    "InboxUnavailableError",
    "KnownProcessFilter",
    "LatencyHistogram",
    "MemoryInbox",
    "Metrics",
    "NoVerification",
    "PostgresBackend",
    "PostgresInbox",
    "PostgresRegistry",
    "PostgresWrites",
    "ReceiverOptions",
    "ReceiverTelemetry",
    "RedactingAccessLogger",
    "RedisBackend",
    "RedisInbox",
    "RedisRegistry",
    "RedisWrites",
    "Registry",
    "RegistryClosedError",
    "RegistryStats",
    "RegistryUnavailableError",
    "Rejection",
    "SQLiteInbox",
    "StandardWebhooksVerifier",
    "TokenVerifier",
    "UnknownEntryError",
    "Verifier",
    "WebhookEvent",
    "WebhookReceiver",
    "describe_event",
    "metrics_app",
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


if not typing.TYPE_CHECKING:  # type checkers see no such name here: they point at the new place

    def __getattr__(name: str) -> object:
        """A name that moved to :mod:`webhooks.contract` (what a backend author imports), still
        found here, with a warning naming its new place."""
        if name in contract.__all__:
            warnings.warn(
                f"webhooks.{name} moved to webhooks.contract.{name}: import it from there",
                DeprecationWarning,
                stacklevel=2,
            )
            return vars(contract)[name]
        raise AttributeError(f"module 'webhooks' has no attribute {name!r}")
