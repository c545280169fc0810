"""The one exception tree of ``webhooks``: its own errors under the SDK's base, and the ones it
raises from ``asyncsdk``.

::

    AsyncSDKError                      (asyncsdk) every error the two packages raise
    ├── ConfigurationError             (asyncsdk) a receiver, verifier, inbox, registry or backend
    │                                  was given a wrong argument, or a store cannot keep the
    │                                  promise asked of it (RedisInbox's durability="strict")
    ├── WaitTimeoutError               (asyncsdk; also a TimeoutError) Registry.wait passed its
    │                                  timeout
    ├── InboxError                     an inbox's store refused a command or answered what the
    │                                  inbox cannot read
    │   ├── InboxUnavailableError      the store cannot be reached; the receiver answers 503
    │   │                              with Retry-After and its workers try again
    │   └── UnknownEntryError          (also a LookupError) no entry with that id in the state
    │                                  the call needs (replay or purge of a non-dead letter)
    ├── RegistryClosedError            the registry was closed before or while waiting
    └── RegistryUnavailableError       the store behind a shared registry (Redis, PostgreSQL)
                                       cannot be reached or refused the command

Handlers' own exceptions are not wrapped: the worker records them and retries the entry, then
dead-letters it.  The verdicts of a delivery (401, 413, 415, ...) are values
(:class:`~webhooks.Rejection`), never raised.
"""

from __future__ import annotations

from asyncsdk import AsyncSDKError

__all__ = [
    "InboxError",
    "InboxUnavailableError",
    "RegistryClosedError",
    "RegistryUnavailableError",
    "UnknownEntryError",
]


class InboxError(AsyncSDKError):
    """Base of the inbox errors."""


class InboxUnavailableError(InboxError):
    """The backing store cannot be reached; the receiver answers 503 with ``Retry-After``."""


class UnknownEntryError(InboxError, LookupError):
    """No entry with that id in the state the operation needs (e.g. replay of a non-dead letter)."""


class RegistryClosedError(AsyncSDKError):
    """The registry was closed before or while waiting; poll the process instead."""


class RegistryUnavailableError(AsyncSDKError):
    """The store behind a shared registry (Redis) cannot be reached or refused the command."""
