"""Sans-io decoding of a webhook delivery: bytes and a content type in, a verdict out.

No aiohttp here.  :func:`parse_delivery` turns the raw body of a POST into one of

* :class:`Parsed`: a ``process.completed`` event, ready to store;
* :class:`Ignored`: a well-formed delivery of an event type this library does not know; the
  receiver answers 2xx so that a new event type cannot start a retry storm;
* :class:`Rejection`: the sender sent something unusable; ``status`` is the 4xx to answer and
  ``reason`` says what is wrong and how to fix it.

Every field is checked here, each with its own reason (the shared converter would turn ``123``
into ``"123"`` and accept ``null`` for a tuple), and the models are then built directly.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any, Final

import attrs

from asyncsdk import ProcessCompleted, ResultAsset
from webhooks._contract import Ignored, Parsed, Rejection

__all__ = [
    "EVENT_PROCESS_COMPLETED",
    "MAX_ID_LENGTH",
    "MAX_JSON_DEPTH",
    "check_content_type",
    "id_fault",
    "is_id",
    "json_depth_exceeds",
    "json_type",
    "load_json",
    "parse_body",
    "parse_delivery",
    "parse_event",
    "unix_seconds",
]

EVENT_PROCESS_COMPLETED: Final = "process.completed"
MAX_JSON_DEPTH: Final = 32
"""Deepest nesting of arrays/objects accepted; the real payload is 3 levels deep."""

_REQUIRED_STRINGS: Final = ("process_id", "order_id", "tool", "status")
MAX_ID_LENGTH: Final = 200
"""Longest ``process_id``, ``order_id``, ``tool``, ``status`` or ``asset_id`` accepted, in
characters.  The service's ids are a few dozen.  The bound keeps what a sender chooses small
whoever sends it: the longest dedup key (the fetch-back form holds ``order_id``, ``process_id``
and ``status``, at most 4 bytes a character once escaped) stays under the 2,704 bytes of
PostgreSQL's unique index."""
_ASSET_STRINGS: Final = (
    "asset_id",
    "asset_type",
    "asset_role",
    "src",
    "temp_src",
    "thumbnail_src",
    "temp_thumbnail_src",
)
_DEFAULT_ASSET_TYPE: Final = attrs.fields(ResultAsset).asset_type.default
_DEFAULT_ASSET_ROLE: Final = attrs.fields(ResultAsset).asset_role.default
_STRUCTURAL = re.compile(rb'[\[\]{}"\\]')
_MISSING: Final = object()
_PLAIN_JSON: Final = frozenset(("application/json", "application/json; charset=utf-8"))
"""The usual spellings of an accepted content type, recognised without parsing."""


_EMPTY_BODY: Final = Rejection(400, "empty_body", "empty body; send the event as a JSON object")


def check_content_encoding(encoding: str | None, decodable: Sequence[str]) -> Rejection | None:
    """Accept a body sent as is (no ``Content-Encoding``, or ``identity``) or in one of the
    ``decodable`` codings (which the server decoded before the receiver reads it); anything
    else, several codings included, is 415 naming what is accepted (``Accept-Encoding``, as RFC
    9110 section 15.5.16 asks)."""
    if not encoding:
        return None
    coding = encoding.strip().lower()
    if coding == "identity" or coding in decodable:
        return None
    accepted = ", ".join(("identity", *decodable))
    return Rejection(
        415,
        "content_encoding",
        f"unsupported Content-Encoding {encoding.strip()[:40]!r}; send the body as is or in one"
        f" of: {accepted}",
        headers=(("Accept-Encoding", accepted),),
    )


def check_content_type(content_type: str | None) -> Rejection | None:
    """Accept ``application/json`` with no charset or ``charset=utf-8``; anything else is 415."""
    if content_type in _PLAIN_JSON:
        return None
    if not content_type:
        return Rejection(415, "content_type", "missing Content-Type; send application/json")
    media, _, params = content_type.partition(";")
    if media.strip().lower() != "application/json":
        return Rejection(
            415,
            "content_type",
            f"unsupported Content-Type {media.strip()[:100]!r}; send application/json",
        )
    for param in params.split(";"):
        name, _, value = param.partition("=")
        if name.strip().lower() == "charset":
            charset = value.strip().strip('"').lower()
            if charset not in ("utf-8", "utf8"):
                return Rejection(
                    415,
                    "content_type",
                    f"unsupported charset {charset[:40]!r}; the body must be UTF-8 JSON",
                )
    return None


def json_depth_exceeds(body: bytes, limit: int = MAX_JSON_DEPTH) -> bool:
    """True if arrays/objects in ``body`` nest deeper than ``limit``.

    A linear scan that skips string contents, run before ``json.loads`` so that a hostile body
    cannot make the decoder recurse; malformed input is left for the decoder to report.
    """
    if body.count(b"[") + body.count(b"{") <= limit:
        return False  # the depth can never exceed the number of openers
    depth = 0
    in_string = False
    skip_at = -1  # offset of the character a backslash escapes
    for match in _STRUCTURAL.finditer(body):
        at = match.start()
        if at == skip_at:
            continue
        char = match.group()
        if in_string:
            if char == b"\\":
                skip_at = at + 1
            elif char == b'"':
                in_string = False
        elif char == b'"':
            in_string = True
        elif char in (b"[", b"{"):
            depth += 1
            if depth > limit:
                return True
        elif char in (b"]", b"}"):
            depth -= 1
    return False


def parse_delivery(body: bytes, content_type: str | None) -> Parsed | Ignored | Rejection:
    """Decode one delivery: content type, UTF-8, JSON, then the event's fields."""
    rejected = check_content_type(content_type)
    if rejected is not None:
        return rejected
    verdict = parse_body(body)
    return Parsed(verdict) if isinstance(verdict, ProcessCompleted) else verdict


def parse_body(body: bytes) -> ProcessCompleted | Ignored | Rejection:
    """Decode a body already known to be JSON by its content type: the event itself, not
    wrapped in a :class:`Parsed`, on the receiver's path."""
    data = load_json(body)
    if isinstance(data, Rejection):
        return data
    return parse_event(data)


def load_json(body: bytes) -> Any:
    """The JSON value of a body already known to be JSON by its content type, or the
    :class:`Rejection` of a body that is not UTF-8 JSON of bounded depth (no JSON value is a
    :class:`Rejection`, so the answer says which it is)."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        if not body.strip():
            return _EMPTY_BODY
        return Rejection(
            400, "encoding", f"body is not valid UTF-8 (byte offset {exc.start}); send UTF-8 JSON"
        )
    if json_depth_exceeds(body):
        return Rejection(
            400, "too_deep", f"JSON nests deeper than {MAX_JSON_DEPTH} levels; send the flat event"
        )
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        if not text.strip():
            return _EMPTY_BODY
        return Rejection(
            400,
            "bad_json",
            f"body is not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}; "
            "send one complete JSON object",
        )
    except RecursionError:
        return Rejection(400, "too_deep", "JSON nests too deeply; send the flat event")
    except ValueError:
        # Not a JSONDecodeError: an integer past Python's digit limit (sys.int_info).
        return Rejection(
            400, "bad_json", "body is not valid JSON: a number in it is too long to decode"
        )
    if (b"\\ud" in body or b"\\uD" in body) and _lone_surrogate(data):
        # JSON can escape half of a UTF-16 pair on its own; no store can keep such text (UTF-8
        # cannot encode it), so it is refused here rather than answered 503 on every retry.
        return Rejection(
            400,
            "encoding",
            "body holds a lone UTF-16 surrogate escape (\\ud800-\\udfff without its pair);"
            " send valid Unicode",
        )
    return data


def _lone_surrogate(data: Any) -> bool:
    """True if a string in ``data`` holds a surrogate code point (rare: checked on demand)."""
    try:
        json.dumps(data, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def parse_event(data: Any) -> ProcessCompleted | Ignored | Rejection:
    """Check and decode an already-decoded JSON value (a JSON object decodes to a ``dict``)."""
    if not isinstance(data, dict):
        return Rejection(400, "invalid", f"the body must be a JSON object, not {json_type(data)}")
    event = data.get("event", _MISSING)
    if event is _MISSING:
        return Rejection(400, "invalid", "missing field 'event' (expected 'process.completed')")
    if not isinstance(event, str):
        return Rejection(400, "invalid", f"field 'event' must be a string, not {json_type(event)}")
    if event != EVENT_PROCESS_COMPLETED:
        return Ignored("unknown_event", f"event type {event[:100]!r} is not handled")
    missing = _missing_string(data)
    if missing is not None:
        return missing
    assets = data.get("final_assets", [])
    if assets is None:
        assets = []
    if not isinstance(assets, list):
        return Rejection(
            400, "invalid", f"field 'final_assets' must be an array, not {json_type(assets)}"
        )
    results: list[ResultAsset] = []
    for index, asset in enumerate(assets):
        fault = _asset_fault(index, asset)
        if fault is not None:
            return fault
        # Every field was checked, so the model is built directly (as the shared converter
        # would: unknown keys ignored, ``temp_src``/``temp_thumbnail_src`` only where ``src`` /
        # ``thumbnail_src`` are absent).
        results.append(
            ResultAsset(
                asset_id=asset["asset_id"],
                src=asset["src"] if "src" in asset else asset.get("temp_src", ""),
                thumbnail_src=(
                    asset["thumbnail_src"]
                    if "thumbnail_src" in asset
                    else asset.get("temp_thumbnail_src", "")
                ),
                asset_type=asset.get("asset_type", _DEFAULT_ASSET_TYPE),
                asset_role=asset.get("asset_role", _DEFAULT_ASSET_ROLE),
            )
        )
    return ProcessCompleted(
        event=event,
        process_id=data["process_id"],
        order_id=data["order_id"],
        tool=data["tool"],
        status=data["status"],
        final_assets=tuple(results),
    )


def _missing_string(data: dict[str, Any]) -> Rejection | None:
    """The rejection of the first required field that is not an id-like string, if any."""
    for name in _REQUIRED_STRINGS:
        value = data.get(name, _MISSING)
        if isinstance(value, str) and is_id(value):
            continue
        if isinstance(value, str) and value:
            return Rejection(400, "invalid", f"field {name!r} {id_fault(value)}")
        if value is _MISSING:
            return Rejection(400, "invalid", f"missing field {name!r} (a non-empty string)")
        shown = "an empty string" if value == "" else json_type(value)
        return Rejection(400, "invalid", f"field {name!r} must be a non-empty string, not {shown}")
    return None


_MAX_TIMESTAMP_DIGITS: Final = 12
"""Digits of a Unix timestamp in seconds, at most (until the year 33658)."""


def unix_seconds(raw: str) -> int | None:
    """A timestamp header's Unix seconds (ASCII digits, spaces around allowed), or ``None``
    when it is not one."""
    raw = raw.strip()
    if not (raw.isascii() and raw.isdigit()) or len(raw) > _MAX_TIMESTAMP_DIGITS:
        return None
    return int(raw)


def is_id(value: str) -> bool:
    """Whether ``value`` can be an id: 1 to :data:`MAX_ID_LENGTH` printable characters, not
    only spaces (:func:`id_fault` says why not)."""
    return 0 < len(value) <= MAX_ID_LENGTH and value.isprintable() and not value.isspace()


def id_fault(value: str, fix: str = "send the id the service gave") -> str:
    """Why a non-empty string that is not :func:`is_id` cannot be an id: too long, holding an
    unprintable character such as a control character, or blank."""
    if len(value) > MAX_ID_LENGTH:
        return f"is {len(value):,} characters long, over the {MAX_ID_LENGTH} an id may have; {fix}"
    if not value.isprintable():
        bad = next(char for char in value if not char.isprintable())
        return f"holds the unprintable character U+{ord(bad):04X}; {fix}"
    return f"is only spaces; {fix}"


def _asset_fault(index: int, asset: Any) -> Rejection | None:
    """Why ``final_assets[index]`` is refused, or ``None``: an object whose ``asset_id`` is a
    non-empty string and whose other named fields are strings where present."""
    if not isinstance(asset, dict):
        why = f"must be an object, not {json_type(asset)}"
        return Rejection(400, "invalid", f"final_assets[{index}] {why}")
    asset_id = asset.get("asset_id")
    if not isinstance(asset_id, str) or not asset_id:
        return Rejection(
            400, "invalid", f"final_assets[{index}].asset_id must be a non-empty string"
        )
    if not is_id(asset_id):
        return Rejection(400, "invalid", f"final_assets[{index}].asset_id {id_fault(asset_id)}")
    for name in _ASSET_STRINGS:
        if name in asset and not isinstance(asset[name], str):
            why = f"must be a string, not {json_type(asset[name])}"
            return Rejection(400, "invalid", f"final_assets[{index}].{name} {why}")
    return None


def json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__
