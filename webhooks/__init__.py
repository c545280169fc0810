"""Receive the service's ``process.completed`` webhooks without losing one.

Mount :class:`WebhookReceiver` in an aiohttp app; it verifies each delivery, stores it durably in
an :class:`Inbox` (atomic dedup on (event, process_id, status)) before answering 2xx, and runs
handlers from the inbox in a worker pool with retries and dead letters.
"""

from webhooks._fetchback import KnownProcessFilter, ProcessClient
from webhooks._memory import MemoryInbox
from webhooks._metrics import LatencyHistogram, Metrics
from webhooks._parse import Ignored, Parsed, Rejection, parse_delivery
from webhooks._postgres import PostgresInbox, PostgresRegistry, PostgresWrites
from webhooks._receiver import RECEIVER_KEY, RedactingAccessLogger, WebhookReceiver
from webhooks._redis import RedisInbox, RedisRegistry, RedisWrites
from webhooks._registry import (
    Registry,
    RegistryClosedError,
    RegistryStats,
    RegistryUnavailableError,
)
from webhooks._sqlite import SQLiteInbox
from webhooks._store import (
    AtomicInbox,
    Inbox,
    InboxEntry,
    InboxError,
    InboxUnavailableError,
    RegistrySink,
    ResultSink,
    UnknownEntryError,
)
from webhooks._verify import (
    Delivery,
    NoVerification,
    StandardWebhooksVerifier,
    TokenVerifier,
    Verifier,
)
from webhooks._worker import AtomicHandler, Handler

__all__ = [
    "RECEIVER_KEY",
    "AtomicHandler",
    "AtomicInbox",
    "Delivery",
    "Handler",
    "Ignored",
    "Inbox",
    "InboxEntry",
    "InboxError",
    "InboxUnavailableError",
    "KnownProcessFilter",
    "LatencyHistogram",
    "MemoryInbox",
    "Metrics",
    "NoVerification",
    "Parsed",
    "PostgresInbox",
    "PostgresRegistry",
    "PostgresWrites",
    "ProcessClient",
    "RedactingAccessLogger",
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
    "WebhookReceiver",
    "parse_delivery",
]
