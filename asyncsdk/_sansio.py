"""Protocol logic of the client, free of I/O.

Everything here is a plain function or value of ``(method, url, status, headers, body)``: building
request URLs and query strings, reading an answer into a model or an error, deciding whether and
when to retry, parsing ``Retry-After``, following pagination.  The network lives in
``_transport.py``; nothing in this module imports aiohttp.
"""

from __future__ import annotations

import json
import math
import random
import re
import time
from collections.abc import Callable, Mapping, Sequence
from email.utils import parsedate_to_datetime
from http import HTTPStatus
from typing import TYPE_CHECKING, Any, Final, TypeGuard, TypeVar
from urllib.parse import parse_qsl, quote

import attrs
import cattrs
from yarl import URL

from asyncsdk._convert import unwrap_envelope
from asyncsdk._errors import (
    APIDecodeError,
    APIStatusError,
    AsyncSDKError,
    ConfigurationError,
    ValidationError,
    status_error_class,
)

if TYPE_CHECKING:
    from asyncsdk._uploads import MultipartForm

__all__ = [
    "IDEMPOTENT_METHODS",
    "RETRYABLE_STATUSES",
    "ApiKey",
    "Request",
    "RetryPolicy",
    "Timeout",
    "endpoint",
    "is_mapping",
    "is_sequence",
    "next_page_params",
    "parse_retry_after",
    "query",
    "read_response",
    "require_text",
    "status_error",
]

T = TypeVar("T")

#: Statuses worth another attempt: rate limited, or a gateway that could not reach the service.
RETRYABLE_STATUSES: Final = frozenset({429, 502, 503, 504})
#: Methods that may be repeated after the server may have seen them.  Every POST of this service
#: creates something that costs money and there is no idempotency key, so POST is not among them.
IDEMPOTENT_METHODS: Final = frozenset({"GET", "HEAD", "OPTIONS"})

_BODY_EXCERPT = 2000
_MESSAGE_EXCERPT = 500
_DELAY_SECONDS = re.compile(r"\d+(\.\d+)?")


def is_mapping(value: object) -> TypeGuard[Mapping[Any, Any]]:
    """``isinstance(value, Mapping)``, with the plain ``dict`` answered without the ABC check."""
    return type(value) is dict or isinstance(value, Mapping)


def is_sequence(value: object) -> TypeGuard[Sequence[Any]]:
    """``isinstance(value, Sequence)``, with ``list`` and ``tuple`` answered without the ABC."""
    return type(value) is list or type(value) is tuple or isinstance(value, Sequence)


class ApiKey:
    """Holds the API key; its repr and str never show it.  ``reveal()`` is for the header only."""

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        self._value = value

    def reveal(self) -> str:
        return self._value

    def __repr__(self) -> str:
        return "ApiKey('<hidden>')"

    __str__ = __repr__

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ApiKey) and other._value == self._value

    def __hash__(self) -> int:
        return hash(self._value)


def _check_timeout(_: object, attribute: attrs.Attribute[Any], value: Any) -> None:
    if value is not None and (
        isinstance(value, bool) or not isinstance(value, int | float) or not value > 0
    ):
        raise ConfigurationError(
            f"Timeout.{attribute.name} must be a positive number of seconds or None, not {value!r}"
        )


@attrs.frozen(kw_only=True)
class Timeout:
    """Time limits of one HTTP attempt, in seconds (``None`` means no limit).

    ``connect`` bounds opening the TCP connection; ``total`` bounds the whole attempt once it holds
    one of the client's in-flight slots (sending the body and reading the answer included).  Time
    spent waiting for a slot never counts against either.
    """

    connect: float | None = attrs.field(default=10.0, validator=_check_timeout)
    total: float | None = attrs.field(default=60.0, validator=_check_timeout)

    def with_total(self, total: float | Timeout | None) -> Timeout:
        """This timeout with a per-call override: a number replaces ``total`` only."""
        if total is None:
            return self
        if isinstance(total, Timeout):
            return total
        return attrs.evolve(self, total=total)


def _non_negative(_: object, attribute: attrs.Attribute[Any], value: float) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
        raise ConfigurationError(f"{attribute.name} must be a number >= 0, not {value!r}")


@attrs.frozen(kw_only=True)
class RetryPolicy:
    """When to try a request again, and how long to wait first.

    * 429 is retried for every method: the service refused without doing anything.
    * 502, 503 and 504 are retried for GET only.  A POST that drew one of them did reach a proxy
      that may have passed it on, and a repeated POST can create a second, paid-for process.
    * Network failures are retried for GET always, and for POST only when the request surely
      never reached the server (refused connection, DNS failure, connect timeout).
    * The wait is ``Retry-After`` when the answer carries one (seconds or an HTTP date), else
      exponential backoff with full jitter:
      ``uniform(0, min(backoff_max, backoff_initial * 2**n))``.
      A ``Retry-After`` longer than ``max_retry_after`` is not waited for: the error is raised at
      once and carries ``retry_after``.
    """

    max_retries: int = attrs.field(default=3, validator=_non_negative)
    backoff_initial: float = attrs.field(default=0.5, validator=_non_negative)
    backoff_max: float = attrs.field(default=8.0, validator=_non_negative)
    max_retry_after: float = attrs.field(default=60.0, validator=_non_negative)

    def backoff(self, attempt: int, rand: Callable[[], float] = random.random) -> float:
        """Full-jitter delay before retry number ``attempt + 1`` (``attempt`` counts from 0)."""
        ceiling = min(self.backoff_max, self.backoff_initial * (2.0 ** min(attempt, 62)))
        return rand() * ceiling

    def after_status(
        self,
        method: str,
        attempt: int,
        status: int,
        headers: Mapping[str, str],
        *,
        replayable: bool = True,
        rand: Callable[[], float] = random.random,
    ) -> float | None:
        """Seconds to wait before retrying an answer with ``status``, or ``None`` to give up."""
        if attempt >= self.max_retries or not replayable or status not in RETRYABLE_STATUSES:
            return None
        if status != 429 and method.upper() not in IDEMPOTENT_METHODS:
            return None
        retry_after = parse_retry_after(headers)
        if retry_after is None:
            return self.backoff(attempt, rand)
        if retry_after > self.max_retry_after:
            return None
        return retry_after

    def after_failure(
        self,
        method: str,
        attempt: int,
        *,
        request_sent: bool,
        replayable: bool = True,
        rand: Callable[[], float] = random.random,
    ) -> float | None:
        """Seconds to wait before retrying a network failure, or ``None`` to give up."""
        if attempt >= self.max_retries or not replayable:
            return None
        if request_sent and method.upper() not in IDEMPOTENT_METHODS:
            return None
        return self.backoff(attempt, rand)


@attrs.frozen(kw_only=True)
class Request:
    """One request, fully built: the transport only carries it out."""

    method: str
    url: URL
    json: Any = None
    form: MultipartForm | None = None
    authenticated: bool = True

    @property
    def replayable(self) -> bool:
        """Whether the body can be sent again (a streamed upload cannot)."""
        return self.form is None or self.form.replayable


def endpoint(base: URL, *segments: str) -> URL:
    """``base`` with path segments appended; each segment is percent-encoded (ids are opaque)."""
    path = "/".join(quote(segment, safe="") for segment in segments)
    return base.with_path(f"{base.raw_path.rstrip('/')}/{path}", encoded=True)


def query(**values: str | int | None) -> dict[str, str]:
    """Query parameters with the ``None`` ones left out."""
    return {name: str(value) for name, value in values.items() if value is not None}


def _header(headers: Mapping[str, str], name: str) -> str | None:
    value = headers.get(name)
    if value is not None:
        return value
    lowered = name.lower()
    for key, candidate in headers.items():
        if key.lower() == lowered:
            return candidate
    return None


def parse_retry_after(headers: Mapping[str, str], *, now: float | None = None) -> float | None:
    """Seconds to wait according to ``Retry-After`` (delay-seconds or an HTTP date), else ``None``.

    A date in the past gives ``0.0``; an unreadable value gives ``None``.
    """
    value = _header(headers, "Retry-After")
    if value is None:
        return None
    value = value.strip()
    if _DELAY_SECONDS.fullmatch(value):
        seconds = float(value)
        return seconds if math.isfinite(seconds) else None
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        return None
    current = time.time() if now is None else now
    return max(0.0, when.timestamp() - current)


def _excerpt(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit] + "..."


def status_error(
    status: int, headers: Mapping[str, str], body: bytes, *, method: str, url: str
) -> APIStatusError:
    """The error for a non-2xx answer: ``{error, key}`` from a JSON body, else the raw text."""
    text = body.decode("utf-8", "replace")
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
        location = _header(headers, "Location") or "an unknown address"
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
    cls = status_error_class(status)
    return cls(
        message,
        status=status,
        key=key,
        headers={k: v for k, v in headers.items() if k.lower() != "x-api-key"},
        body=_excerpt(text, _BODY_EXCERPT),
        method=method,
        url=url,
    )


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
            content_type = _header(headers, "Content-Type") or "no content type"
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


def next_page_params(
    next_page: str, current: Mapping[str, str], *, page: int, total_pages: int
) -> dict[str, str] | None:
    """The query of the page after ``page``, or ``None`` when it is the last one.

    ``next_page`` is the service's ``?page=<n>&limit=<n>`` string; its values are laid over
    ``current`` so sort, search and size parameters carry over.  A ``next_page`` that does not move
    forward ends the listing rather than looping.
    """
    if not next_page:
        return None
    raw = next_page.split("?", 1)[1] if "?" in next_page else next_page
    given = dict(parse_qsl(raw, keep_blank_values=True))
    params = {**current, **given}
    try:
        following = int(given.get("page", ""))
    except ValueError:
        following = page + 1
        if total_pages and following > total_pages:
            return None
        params["page"] = str(following)
    if following <= page:
        return None
    return params


def require_text(value: object, what: str) -> str:
    """``value`` when it is a non-empty string, else a ``ValidationError`` naming ``what``."""
    if not isinstance(value, str) or not value.strip():
        raise ValidationError(f"{what} must be a non-empty string, not {value!r}")
    return value
