"""The receiver's exceptions, all under the package base :class:`~asyncsdk.AsyncSDKError`.

The client's own errors (``ConfigurationError``, ``ValidationError``, the API's) are in
``asyncsdk``; these are the ones only the receiver, its inboxes and its registries raise.
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
