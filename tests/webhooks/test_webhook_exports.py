"""The public surface of ``webhooks`` is its ``__all__``, and importing it needs no Redis."""

from __future__ import annotations

import subprocess
import sys
from types import ModuleType

import pytest

import webhooks

PUBLIC = {
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
}


#: What a backend author imports, from ``webhooks.contract`` (once at the top level: still found
#: there, with a DeprecationWarning naming the new place).
CONTRACT = {
    "AtomicInbox",
    "Backend",
    "ClaimingInbox",
    "Ignored",
    "InspectableInbox",
    "Parsed",
    "ProcessClient",
    "RegistrySink",
    "ResultSink",
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


def test_a_backend_author_s_names_are_in_webhooks_contract() -> None:
    import webhooks.contract

    assert set(webhooks.contract.__all__) == CONTRACT
    assert webhooks.contract.AtomicInbox.__module__ == "webhooks.contract"


def test_a_name_moved_to_the_contract_still_imports_from_the_top_with_a_warning() -> None:
    import webhooks.contract

    for name in CONTRACT:
        with pytest.warns(DeprecationWarning, match=f"webhooks.contract.{name}"):
            moved = getattr(webhooks, name)  # as `from webhooks import ...` looks it up
        assert moved is vars(webhooks.contract)[name]
    with pytest.raises(AttributeError, match="no attribute 'Inbxo'"):
        getattr(webhooks, "Inbxo")  # noqa: B009 - the name is looked up as an import would


def test_importing_webhooks_does_not_import_redis() -> None:
    code = "import sys, webhooks; print('redis' in sys.modules)"
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == "False"
