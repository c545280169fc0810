"""The storage form of an event: one codec every durable inbox and the Redis registry use.

An event is stored as compact JSON with the model's own field names (``attrs.asdict``), and read
back with the client's converter (:func:`asyncsdk.structure`).  Its dedup key is stored as the
JSON array ``[event, process_id, status]``.  Both texts are the ones earlier versions wrote, so
entries stored by them read back unchanged.
"""

from __future__ import annotations

import json

import attrs

from asyncsdk import ProcessCompleted, structure

__all__ = ["decode_event", "dedup_key_text", "encode_event"]


def dedup_key_text(event: ProcessCompleted) -> str:
    """The dedup key as one unambiguous string (a JSON array), for use as a storage key."""
    return json.dumps(list(event.dedup_key), separators=(",", ":"), ensure_ascii=False)


def encode_event(event: ProcessCompleted) -> bytes:
    """The storage form of an event (compact JSON, the model's own field names)."""
    return json.dumps(attrs.asdict(event), separators=(",", ":"), ensure_ascii=False).encode()


def decode_event(data: bytes | str) -> ProcessCompleted:
    """Inverse of :func:`encode_event`."""
    return structure(json.loads(data), ProcessCompleted)
