"""Handlers as registered: :func:`handler_spec` reads a handler's form from its signature once
(with ``writes``, with a :class:`~webhooks.DeliveryInfo`), and the matchers that pick the events
it wants (:class:`ProcessMatch`, :class:`TypeMatch`)."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import attrs

from asyncsdk import ConfigurationError, ProcessCompleted
from webhooks._contract import AtomicInbox, Inbox
from webhooks._dispatch import HandlerSpec
from webhooks._events import WebhookEvent

__all__ = ["ProcessMatch", "TypeMatch", "handler_spec"]


_POSITIONAL = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)


def handler_spec(
    func: Callable[..., Any],
    *,
    inbox: Inbox,
    wants: Callable[[Any], bool] | None,
    atomic: bool,
) -> HandlerSpec:
    """The :class:`HandlerSpec` of ``func``, or :class:`~asyncsdk.ConfigurationError` naming the
    fix."""
    if not callable(func):
        raise ConfigurationError("a handler must be an async function taking the event")
    if atomic and not isinstance(inbox, AtomicInbox):
        raise ConfigurationError(
            f"atomic=True handlers need an inbox that applies writes with the ack, and"
            f" {type(inbox).__name__} does not: use RedisInbox or PostgresInbox, or"
            " register the handler without atomic=True and make its writes idempotent: key"
            " them on event.dedup_key, the key the inbox deduplicates on (a tuple of strings;"
            " ':'.join(event.dedup_key) is one string)"
        )
    fixed = 2 if atomic else 1
    return HandlerSpec(func, wants, atomic=bool(atomic), with_info=_takes_info(func, fixed, atomic))


@attrs.frozen
class ProcessMatch:
    """The ``process.completed`` events a handler wants: these statuses and tools (``None``:
    any)."""

    statuses: frozenset[str] | None
    tools: frozenset[str] | None

    def __call__(self, event: ProcessCompleted) -> bool:
        return (self.statuses is None or event.status in self.statuses) and (
            self.tools is None or event.tool in self.tools
        )


@attrs.frozen
class TypeMatch:
    """The events of other senders a handler wants: these types."""

    types: frozenset[str]

    def __call__(self, event: WebhookEvent) -> bool:
        return event.type in self.types


def _takes_info(func: Callable[..., Any], fixed: int, atomic: bool) -> bool:
    """Whether ``func`` takes a :class:`~webhooks.DeliveryInfo` after its ``fixed`` parameters."""
    try:
        parameters = inspect.signature(func).parameters.values()
    except (TypeError, ValueError):  # a builtin or extension callable without a signature
        return False
    if any(p.kind is inspect.Parameter.VAR_POSITIONAL for p in parameters):
        return False  # takes what it is given: the fixed parameters only
    positional = [p for p in parameters if p.kind in _POSITIONAL]
    required = [p for p in positional if p.default is inspect.Parameter.empty]
    if len(required) > fixed + 1 or len(positional) < fixed:
        kind, forms = (
            ("an atomic=True handler", "(event, writes) or (event, writes, info)")
            if atomic
            else ("a handler", "(event) or (event, info)")
        )
        raise ConfigurationError(
            f"{kind} takes {forms}, and {func!r} takes {len(positional)} positional parameter(s)"
        )
    # An optional parameter past the fixed ones keeps its default, as before DeliveryInfo.
    return len(required) > fixed
