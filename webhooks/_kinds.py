"""Event kinds: how a receiver reads one verified delivery into the event it stores.

Sans-io, like :mod:`webhooks._parse`.  A receiver is built on one kind; everything after the parse
(dedup, the durable inbox, the workers, retries, dead letters, metrics, spans) is the same for
every kind.  The kind's event brings its own dedup key (``event.dedup_key``) and the one codec
(:mod:`webhooks._codec`) stores either value, so that an inbox, and ``asyncsdk inbox``, read any
entry without knowing which receiver stored it.

* :data:`PROCESS_COMPLETED`: the service's ``process.completed`` body (:func:`parse_body`),
  deduplicated on (event, process_id, status);
* :class:`SenderEvents`: any sender's :class:`~webhooks.WebhookEvent`, deduplicated on the
  sender's message id, read from a header (``webhook-id`` by the Standard Webhooks
  specification, ``svix-id`` as Svix sends it by default).
"""

from __future__ import annotations

from typing import Final, Protocol, TypeVar

import attrs

from asyncsdk import ProcessCompleted
from webhooks._contract import Delivery, Ignored, Rejection, StoredEvent
from webhooks._events import WebhookEvent, payload_data
from webhooks._parse import id_fault, is_id, json_type, load_json, parse_body, unix_seconds

__all__ = [
    "DEFAULT_ID_HEADERS",
    "DEFAULT_TIMESTAMP_HEADERS",
    "PROCESS_COMPLETED",
    "EventKind",
    "ProcessCompletedKind",
    "SenderEvents",
]

E_co = TypeVar("E_co", bound=StoredEvent, covariant=True)

DEFAULT_ID_HEADERS: Final = ("webhook-id", "svix-id")
"""Where a Standard Webhooks sender puts its message id (Svix sends its own names by default)."""
DEFAULT_TIMESTAMP_HEADERS: Final = ("webhook-timestamp", "svix-timestamp")


class EventKind(Protocol[E_co]):
    """How a receiver turns a verified delivery into its event: the event, a 2xx
    :class:`~webhooks.Ignored`, or a 4xx :class:`~webhooks.Rejection` naming the fix."""

    def parse(self, delivery: Delivery) -> E_co | Ignored | Rejection: ...


@attrs.frozen
class ProcessCompletedKind:
    """The service's ``process.completed`` event: the body alone says everything."""

    def parse(self, delivery: Delivery) -> ProcessCompleted | Ignored | Rejection:
        return parse_body(delivery.body)


PROCESS_COMPLETED: Final = ProcessCompletedKind()


def _lower(value: str | None) -> str | None:
    return None if value is None else value.lower()


def _names(value: str | tuple[str, ...] | None) -> tuple[str, ...]:
    if value is None:
        return ()
    return (value.lower(),) if isinstance(value, str) else tuple(v.lower() for v in value)


@attrs.frozen
class SenderEvents:
    """Any sender's events: the message id from the first of ``id_headers`` present, the
    timestamp from the first of ``timestamp_headers`` present (Unix seconds; ``None`` when the
    sender sends none), the type from ``type_header`` when given, else from the body's ``type``
    string (the Standard Webhooks envelope), and ``data`` from the JSON body
    (:func:`~webhooks._events.payload_data`)."""

    id_headers: tuple[str, ...] = attrs.field(default=DEFAULT_ID_HEADERS, converter=_names)
    timestamp_headers: tuple[str, ...] = attrs.field(
        default=DEFAULT_TIMESTAMP_HEADERS, converter=_names
    )
    type_header: str | None = attrs.field(default=None, converter=_lower)

    def parse(self, delivery: Delivery) -> WebhookEvent | Rejection:
        headers = delivery.headers
        msg_id = next((headers[h] for h in self.id_headers if headers.get(h)), None)
        if msg_id is None:
            return Rejection(
                400,
                "invalid",
                f"missing header {' or '.join(self.id_headers)}: the sender's message id, on"
                " which deliveries are deduplicated",
            )
        if not is_id(msg_id):
            fix = "send the message id the sender gave"
            return Rejection(400, "invalid", f"the message id {id_fault(msg_id, fix)}")
        raw_ts = next((headers[h] for h in self.timestamp_headers if headers.get(h)), None)
        timestamp = None
        if raw_ts is not None:
            timestamp = unix_seconds(raw_ts)
            if timestamp is None:
                return Rejection(400, "invalid", "the timestamp header must be Unix seconds")
        payload = load_json(delivery.body)
        if isinstance(payload, Rejection):
            return payload
        if self.type_header is not None:
            event_type = headers.get(self.type_header)
            if not event_type:
                return Rejection(
                    400, "invalid", f"missing header {self.type_header}: the event type"
                )
        else:
            event_type = payload.get("type") if isinstance(payload, dict) else None
            if not isinstance(event_type, str) or not event_type:
                shown = "missing" if event_type is None else json_type(event_type or None)
                return Rejection(
                    400,
                    "invalid",
                    f"the body's 'type' is {shown}; send a JSON object whose 'type' is the"
                    " event type, a non-empty string",
                )
        if not is_id(event_type):
            fix = "send the event type the sender documents"
            return Rejection(400, "invalid", f"the event type {id_fault(event_type, fix)}")
        return WebhookEvent(
            id=msg_id,
            type=event_type,
            timestamp=timestamp,
            data=payload_data(payload),
            raw=delivery.body,
        )
