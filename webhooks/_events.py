"""The event of any sender: :class:`WebhookEvent`, the frozen value a generic receiver stores and
hands to its handlers."""

from __future__ import annotations

from typing import Any, Final

import attrs

__all__ = ["DEDUP_NAMESPACE", "STORAGE_MEMBER", "WebhookEvent", "payload_data"]

DEDUP_NAMESPACE: Final = "webhook"
"""The first element of a generic event's dedup key: its keys never equal a
``process.completed`` key, which has three elements."""
STORAGE_MEMBER: Final = "webhook"
"""The one member of a generic event's storage form, which a ``process.completed`` form never
has: the codec tells the two apart by it when it reads an entry back."""


def payload_data(payload: Any) -> Any:
    """What :attr:`WebhookEvent.data` holds for a parsed body: its ``data`` member when the body
    is a JSON object that has one (the Standard Webhooks envelope ``{type, timestamp, data}``),
    else the whole body (senders such as GitHub send the payload bare)."""
    if isinstance(payload, dict) and "data" in payload:
        return payload["data"]
    return payload


@attrs.frozen(kw_only=True)
class WebhookEvent:
    """One delivery of any sender, verified and stored: what the handlers of an
    :class:`~webhooks.EventReceiver` get.

    Deliveries are deduplicated on :attr:`id`, the sender's message id (``webhook-id`` for a
    Standard Webhooks sender, as its specification says to): a retry of the same message is a
    duplicate, whatever its body.
    """

    id: str
    """The sender's message id (``webhook-id``, or the header the receiver was told to read)."""
    type: str
    """The event type: the body's ``type`` (Standard Webhooks), or the header the receiver was
    told to read (``X-GitHub-Event`` for GitHub)."""
    timestamp: int | None
    """When the sender says it sent the message, Unix seconds (``webhook-timestamp``); ``None``
    when the sender sends no timestamp header."""
    data: Any = attrs.field(hash=False)
    """The parsed JSON body's ``data`` member, or the whole parsed body when it has none (see
    :func:`payload_data`).  Treat it as read-only: it is shared by every handler of the event.
    Compared by ``==``, left out of the hash (a JSON object is no key)."""
    raw: bytes = attrs.field(repr=False)
    """The body exactly as received: what the signature was checked against."""

    @property
    def dedup_key(self) -> tuple[str, str]:
        """``("webhook", id)``: a delivery's identity is the sender's message id."""
        return (DEDUP_NAMESPACE, self.id)

    def storage_fields(self) -> dict[str, object]:
        """What an inbox stores of the event: ``{"webhook": {"id", "type", "timestamp"}}``;
        :attr:`data` is read again from :attr:`raw`, which the inbox keeps anyway."""
        return {STORAGE_MEMBER: {"id": self.id, "type": self.type, "timestamp": self.timestamp}}

    def describe(self) -> dict[str, str]:
        """What an operator reads of the event, by name: ``message_id`` (:attr:`id`) and
        ``type`` (``asyncsdk inbox dead`` lists them; logs carry both, spans the type)."""
        return {"message_id": self.id, "type": self.type}

    @property
    def summary(self) -> str:
        """The event in a log line: ``message msg_1 (invoice.paid)``."""
        return f"message {self.id} ({self.type})"
