"""The storage form of an event: one codec every durable inbox and the Redis registry use.

Two event values are stored (:data:`StoredEvent`); each gives the fields it is stored as
(:meth:`~webhooks._contract.InboxEvent.storage_fields`), which are written as compact JSON.  A
``process.completed`` event is its model's own field names, read back with the client's converter
(:func:`asyncsdk.structure`); its dedup key is the JSON array ``[event, process_id, status]``.
Both texts are the ones earlier versions wrote, so entries stored by them read back unchanged.
A :class:`~webhooks.WebhookEvent` of any other sender is ``{"webhook":{"id":...,"type":...,
"timestamp":...}}``: its ``data`` is read again from the entry's raw body, which the inbox keeps
anyway; its dedup key is ``["webhook", id]``.  The ``"webhook"`` member, which a
``process.completed`` form never has, tells the two apart when they are read back: the stored
text, not the class of a value, decides what :func:`decode_event` builds.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any, Final

from asyncsdk import ProcessCompleted, structure
from webhooks._contract import InboxEntry, InboxEvent, StoredEvent
from webhooks._events import STORAGE_MEMBER, WebhookEvent, payload_data

__all__ = [
    "claimed_entry",
    "decode_event",
    "decode_process_event",
    "dedup_key_text",
    "encode_event",
    "entry_from_row",
]

_ENCODER: Final = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))
"""Compact JSON, non-ASCII characters kept: the text earlier versions stored."""


def dedup_key_text(event: InboxEvent) -> str:
    """The dedup key as one unambiguous string (a JSON array), for use as a storage key."""
    return _ENCODER.encode(event.dedup_key)


def encode_event(event: InboxEvent) -> bytes:
    """The storage form of an event (compact JSON of its :meth:`~InboxEvent.storage_fields`)."""
    return _ENCODER.encode(event.storage_fields()).encode()


def decode_event(data: bytes | str, raw: bytes = b"") -> StoredEvent:
    """Inverse of :func:`encode_event`; ``raw`` is the entry's body (a generic event's ``data``
    is read from it)."""
    stored = json.loads(data)
    fields = stored.get(STORAGE_MEMBER)
    if fields is None:
        return structure(stored, ProcessCompleted)
    return WebhookEvent(
        id=fields["id"],
        type=fields["type"],
        timestamp=fields["timestamp"],
        data=payload_data(json.loads(raw)),
        raw=raw,
    )


def decode_process_event(data: bytes | str) -> ProcessCompleted:
    """A stored ``process.completed`` event (what the registries keep: they hold no other)."""
    return structure(json.loads(data), ProcessCompleted)


def entry_from_row(row: Iterable[Any]) -> InboxEntry:
    """An entry from the row the SQL inboxes read: ``(id, event, raw, attempts, last_error,
    received_at)``, the event in its storage form."""
    entry_id, event, raw, attempts, last_error, received_at = row
    body = bytes(raw)
    return InboxEntry(
        id=str(entry_id),
        event=decode_event(event, body),
        raw=body,
        attempts=int(attempts),
        last_error=last_error,
        received_at=float(received_at),
    )


def claimed_entry(
    stored: tuple[int, float] | None, event: StoredEvent, raw: bytes
) -> InboxEntry | None:
    """The entry a claimed put of the SQL inboxes stored (its id and receive time), handed out
    for the first time, built from the event at hand; ``None`` for a duplicate."""
    if stored is None:
        return None
    entry_id, received_at = stored
    return InboxEntry(id=str(entry_id), event=event, raw=raw, attempts=1, received_at=received_at)
