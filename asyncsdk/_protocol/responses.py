"""Reading an answer (no I/O): a model from a 2xx body, else the error of the status.

Every answer goes through :func:`read_response`; :func:`status_error` builds the error of a non-2xx
answer (downloads use it too).  The decoders turn the JSON value, success envelope removed, into
models with the client's converter.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from http import HTTPStatus
from typing import Any, TypeVar

import cattrs
from yarl import URL

from asyncsdk._checks import is_mapping
from asyncsdk._errors import (
    APIDecodeError,
    APIStatusError,
    AsyncSDKError,
    RateLimitError,
    status_error_class,
)
from asyncsdk._models import Page, Pagination
from asyncsdk._protocol.convert import unwrap_envelope
from asyncsdk._protocol.retry import header_value, parse_retry_after

__all__ = [
    "describe_shape",
    "items_decoder",
    "model_decoder",
    "page_decoder",
    "read_response",
    "status_error",
]

T = TypeVar("T")

_BODY_EXCERPT = 2000
_MESSAGE_EXCERPT = 500


def _excerpt(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit] + "..."


def _message_of(status: int, headers: Mapping[str, str], text: str) -> tuple[str, str]:
    """The message and ``key`` of an error answer: ``{error, key}`` from JSON, else the text."""
    message = ""
    key = ""
    try:
        data = json.loads(text)
    except ValueError:
        data = None
    if isinstance(data, Mapping):
        error = data.get("error")
        if isinstance(error, Mapping):
            error = error.get("message")
        if isinstance(error, str) and error:
            message = error
        elif isinstance(data.get("message"), str):
            message = data["message"]
        if isinstance(data.get("key"), str):
            key = data["key"]
    if 300 <= status < 400:
        location = header_value(headers, "Location") or "an unknown address"
        message = (
            f"unexpected redirect to {location}; the client does not follow redirects, "
            "so point base_url/app_url at the final address"
        )
    if not message:
        message = _excerpt(" ".join(text.split()), _MESSAGE_EXCERPT)
    if not message:
        try:
            message = HTTPStatus(status).phrase
        except ValueError:
            message = f"HTTP {status}"
    return message, key


def status_error(
    status: int,
    headers: Mapping[str, str],
    body: bytes,
    *,
    method: str,
    url: str,
    message: str | None = None,
    hint: str = "",
) -> APIStatusError:
    """The error for a non-2xx answer: ``{error, key}`` from a JSON body, else the raw text.

    ``message`` replaces the one read from the body; ``hint`` says what to change.  A 429
    carries ``retry_after``, measured now.
    """
    text = body.decode("utf-8", "replace")
    read, key = _message_of(status, headers, text)
    details: dict[str, Any] = {
        "status": status,
        "key": key,
        "headers": {k: v for k, v in headers.items() if k.lower() != "x-api-key"},
        "body": _excerpt(text, _BODY_EXCERPT),
        "method": method,
        "url": url,
        "hint": hint,
    }
    if status == 429:
        return RateLimitError(message or read, retry_after=parse_retry_after(headers), **details)
    return status_error_class(status)(message or read, **details)


def _describe(exc: Exception) -> str:
    if isinstance(exc, cattrs.BaseValidationError):
        return "; ".join(cattrs.transform_error(exc))
    return f"{type(exc).__name__}: {exc}"


def read_response(
    status: int,
    headers: Mapping[str, str],
    body: bytes,
    *,
    method: str,
    url: str | URL,
    decode: Callable[[Any], T],
) -> T:
    """Turn an answer into a model (via ``decode``) or raise the matching error.

    ``decode`` receives the JSON value with the success envelope removed (``None`` for an empty
    body).  A body that is not JSON, or that ``decode`` rejects, raises ``APIDecodeError``.
    ``url`` is only shown in errors.
    """
    if not 200 <= status < 300:
        raise status_error(status, headers, body, method=method, url=str(url))
    text = body.decode("utf-8", "replace")
    value: Any = None
    if text.strip():
        try:
            value = json.loads(text)
        except ValueError as exc:
            content_type = header_value(headers, "Content-Type") or "no content type"
            raise APIDecodeError(
                f"the {status} answer to {method} {url} is not JSON ({content_type}): "
                f"{_excerpt(' '.join(text.split()), 200)!r}",
                status=status,
                body=_excerpt(text, _BODY_EXCERPT),
                method=method,
                url=str(url),
            ) from exc
    try:
        return decode(unwrap_envelope(value))
    except AsyncSDKError:
        raise
    except Exception as exc:
        raise APIDecodeError(
            f"the {status} answer to {method} {url} does not have the expected shape: "
            f"{_describe(exc)}",
            status=status,
            body=_excerpt(text, _BODY_EXCERPT),
            method=method,
            url=str(url),
        ) from exc


# --- decoders -------------------------------------------------------------------------------------


def describe_shape(value: Any) -> str:
    """What a JSON value is, for a decoding error: ``a JSON object``, ``an empty body``."""
    if value is None:
        return "an empty body"
    if isinstance(value, Mapping):
        return "a JSON object"
    if isinstance(value, list):
        return "a JSON array"
    return f"a JSON {type(value).__name__}"


def model_decoder(converter: cattrs.Converter, cls: type[T]) -> Callable[[Any], T]:
    """The decoder of one JSON object into ``cls``."""

    def decode(value: Any) -> T:
        if not is_mapping(value):
            raise TypeError(
                f"expected a JSON object for {cls.__name__}, got {describe_shape(value)}"
            )
        return converter.structure(value, cls)

    return decode


def items_decoder(converter: cattrs.Converter, cls: type[T]) -> Callable[[Any], tuple[T, ...]]:
    """The decoder of ``{data: [...], ...}`` or a bare array."""

    def decode(value: Any) -> tuple[T, ...]:
        if isinstance(value, Mapping) and isinstance(value.get("data"), list):
            value = value["data"]
        if not isinstance(value, list):
            raise TypeError(f"expected {{data: [...]}} or an array, got {describe_shape(value)}")
        return tuple(converter.structure(item, cls) for item in value)

    return decode


def page_decoder(
    converter: cattrs.Converter, cls: type[T], *, page: int, limit: int, lenient: bool = False
) -> Callable[[Any], Page[T]]:
    """The decoder of ``{data: [...], pagination: {...}}``; with ``lenient``, also of a listing
    without pagination (the spec shows no shape for the orders of a project), read as one page."""

    def decode(value: Any) -> Page[T]:
        if isinstance(value, Mapping) and "pagination" in value:
            data = {"data": value.get("data"), "pagination": value["pagination"]}
            return converter.structure(data, Page[cls])  # type: ignore[valid-type]
        if not lenient:
            raise TypeError(
                f"expected {{data: [...], pagination: {{...}}}}, got {describe_shape(value)}"
            )
        items = items_decoder(converter, cls)(value)
        pagination = Pagination(page=page, limit=limit, total_count=len(items), total_pages=page)
        return Page(data=items, pagination=pagination)

    return decode
