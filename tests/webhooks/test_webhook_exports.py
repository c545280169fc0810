"""The public surface of ``webhooks`` is its ``__all__``, and importing it needs no Redis."""

from __future__ import annotations

import subprocess
import sys
from types import ModuleType

import webhooks

PUBLIC = {
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
    "RegistryStats",
    "RegistryUnavailableError",
    "RegistrySink",
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
}


def test_all_is_exactly_the_public_names() -> None:
    assert set(webhooks.__all__) == PUBLIC
    assert len(webhooks.__all__) == len(PUBLIC), "a name is listed twice in __all__"
    for name in PUBLIC:
        assert hasattr(webhooks, name), name


def test_no_public_attribute_is_missing_from_all() -> None:
    visible = {
        name
        for name, value in vars(webhooks).items()
        if not name.startswith("_") and not isinstance(value, ModuleType)
    }
    assert visible == PUBLIC


def test_importing_webhooks_does_not_import_redis() -> None:
    code = "import sys, webhooks; print('redis' in sys.modules)"
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == "False"
