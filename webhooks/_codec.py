"""The storage form of an event: one codec every durable inbox and the Redis registry use.

Two event values are stored (:data:`StoredEvent`).  A ``process.completed`` event is compact JSON
with the model's own field names, read back with the client's converter
(:func:`asyncsdk.structure`); its dedup key is the JSON array ``[event, process_id, status]``.
Both texts are the ones earlier versions wrote, so entries stored by them read back unchanged.
A :class:`~webhooks.WebhookEvent` of any other sender is ``{"webhook":{"id":...,"type":...,
"timestamp":...}}``: its ``data`` is read again from the entry's raw body, which the inbox keeps
anyway; its dedup key is ``["webhook", id]``.  The ``"webhook"`` member, which a
``process.completed`` form never has, tells the two apart when they are read back.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from json.encoder import encode_basestring
from typing import Any, Final

from asyncsdk import ProcessCompleted, structure
from webhooks._contract import InboxEntry, StoredEvent
from webhooks._events import WebhookEvent, payload_data

__all__ = [
    "claimed_entry",
    "decode_event",
    "decode_process_event",
    "dedup_key_text",
    "encode_event",
    "entry_from_row",
]

# The storage form is written field by field into these templates, each string escaped by the
# json module's own ``encode_basestring`` (what ``json.dumps(..., ensure_ascii=False)`` uses), so
# the text is the one ``json.dumps`` with compact separators gives, character for character.
# ``json.dumps`` itself sets up a new encoder on every call: 46,000 instructions for the event and
# 16,000 for its dedup key, against 26,000 and 7,000 here, on every put of the durable inboxes
# (benchmark line: receiver + SQLite / PostgreSQL, 128 conns, paced, server CPU per request
# against the hand-written handler's; ``python -m benchmarks.instructions``).
_EVENT_FORM: Final = (
    '{{"event":{},"process_id":{},"order_id":{},"tool":{},"status":{},"final_assets":[{}]}}'
)
_ASSET_FORM: Final = '{{"asset_id":{},"src":{},"thumbnail_src":{},"asset_type":{},"asset_role":{}}}'


_WEBHOOK_FORM: Final = '{{"webhook":{{"id":{},"type":{},"timestamp":{}}}}}'
_WEBHOOK_HEADS: Final = ('{"webhook":', b'{"webhook":')
"""How a stored generic event begins, as text and as bytes (a stored form comes as either)."""


def dedup_key_text(event: StoredEvent) -> str:
    """The dedup key as one unambiguous string (a JSON array), for use as a storage key."""
    return "[" + ",".join(map(encode_basestring, event.dedup_key)) + "]"


def encode_event(event: StoredEvent) -> bytes:
    """The storage form of an event (compact JSON)."""
    # The one place the two stored values are told apart on the way in (a closed union of two
    # frozen values, not a dispatch over implementations): each has its own form.
    if isinstance(event, WebhookEvent):
        timestamp = "null" if event.timestamp is None else str(int(event.timestamp))
        return _WEBHOOK_FORM.format(
            encode_basestring(event.id), encode_basestring(event.type), timestamp
        ).encode()
    return _encode_process(event)


def _encode_process(event: ProcessCompleted) -> bytes:
    """The storage form of a ``process.completed`` event (the model's own field names)."""
    assets = ",".join(
        _ASSET_FORM.format(
            encode_basestring(asset.asset_id),
            encode_basestring(asset.src),
            encode_basestring(asset.thumbnail_src),
            encode_basestring(asset.asset_type),
            encode_basestring(asset.asset_role),
        )
        for asset in event.final_assets
    )
    return _EVENT_FORM.format(
        encode_basestring(event.event),
        encode_basestring(event.process_id),
        encode_basestring(event.order_id),
        encode_basestring(event.tool),
        encode_basestring(event.status),
        assets,
    ).encode()


def decode_event(data: bytes | str, raw: bytes = b"") -> StoredEvent:
    """Inverse of :func:`encode_event`; ``raw`` is the entry's body (a generic event's ``data``
    is read from it)."""
    if data[: len(_WEBHOOK_HEADS[0])] in _WEBHOOK_HEADS:
        fields = json.loads(data)["webhook"]
        return WebhookEvent(
            id=fields["id"],
            type=fields["type"],
            timestamp=fields["timestamp"],
            data=payload_data(json.loads(raw)),
            raw=raw,
        )
    return structure(json.loads(data), ProcessCompleted)


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
