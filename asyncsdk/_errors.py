"""The one exception tree of the SDK: every error the client itself raises is one of these.

::

    AsyncSDKError                      every error this package raises
    ├── ConfigurationError             the library was misused (missing key, closed client, option)
    ├── ValidationError                a call's argument is wrong; caught before anything was sent
    │   ├── UploadError                a file to upload cannot be read or breaks a rule (format,
    │   │                              size; an image's role is a plain ValidationError)
    │   ├── MaskError                  a mask breaks the blue/black convention or misfits its
    │   │                              photo, or an image opened passes 8192 x 8192 pixels
    │   ├── V1MappingError             a V1 name or id has no known V3 counterpart
    │   ├── KeyReusedError             a run's key given again with other arguments
    │   └── CatalogueError             a process request does not fit the tool catalogue
    │       ├── UnknownToolError           the tool is not in the catalogue
    │       ├── InactiveError              a tool, widget or item that is switched off
    │       ├── UnknownWidgetError         a widget the tool does not have
    │       ├── MissingWidgetError         a required widget left out
    │       ├── UnknownItemError           an item its widget does not have
    │       ├── SelectionError             items that cannot go together
    │       └── InputError                 wrong input slots or assets
    ├── APIError                       the service (or what stands in front of it) answered badly
    │   ├── APIStatusError             a non-2xx answer; carries status, key, message, headers
    │   │   ├── BadRequestError            400
    │   │   ├── AuthenticationError        401
    │   │   ├── PermissionDeniedError      403
    │   │   ├── NotFoundError              404
    │   │   ├── UnprocessableEntityError   422
    │   │   ├── RateLimitError             429 (``retry_after``)
    │   │   └── ServerError                5xx
    │   ├── APIConnectionError         the request could not be carried out on the network
    │   │   │                          (``request_sent``); a download's redirects past 10
    │   │   └── APITimeoutError        ... because a connect or total timeout passed
    │   ├── APIDecodeError             a 2xx body that matches no model (an HTML page from a proxy)
    │   └── ResultTooLargeError        a result download passed its ``max_bytes``
    ├── JournalError                   the journal of runs failed, holds a row the library did
    │                                  not write (corrupt, or lying), or a run was taken over
    ├── ProcessFailedError             a process ended with status ``failed`` (only where asked for)
    └── WaitTimeoutError               waiting for a process passed its deadline; also a
                                       ``TimeoutError``

Any other status than those named (409, 418, ...) is an ``APIStatusError`` itself
(:func:`status_error_class`).  ``ConfigurationError`` and ``ValidationError`` mean "fix the call";
``APIError`` means "the other side said no or could not be reached".  No message, repr or
attribute ever holds the API key.

Outside the tree, on purpose: the command line's ``UsageError`` (a ``ConfigurationError`` that
ends a command with its exit code) lives in ``asyncsdk.cli``; the sandbox answers a broken rule as
the service's HTTP error (its ``SandboxError`` never reaches a caller) and a misused ``Sandbox``
raises ``RuntimeError`` or ``ValueError``.  What is not the client's goes through unchanged: an
``OSError`` of the caller's file system (a result written to a path) and what a caller's own
callables raise, except an upload source's failure to be read, which is an ``UploadError``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from multidict import CIMultiDict, CIMultiDictProxy

from asyncsdk._models import MaskReport

__all__ = [
    "APIConnectionError",
    "APIDecodeError",
    "APIError",
    "APIStatusError",
    "APITimeoutError",
    "AsyncSDKError",
    "AuthenticationError",
    "BadRequestError",
    "CatalogueError",
    "ConfigurationError",
    "InactiveError",
    "InputError",
    "JournalError",
    "KeyReusedError",
    "MaskError",
    "MissingWidgetError",
    "NotFoundError",
    "PermissionDeniedError",
    "ProcessFailedError",
    "RateLimitError",
    "ResultTooLargeError",
    "SelectionError",
    "ServerError",
    "UnknownItemError",
    "UnknownToolError",
    "UnknownWidgetError",
    "UnprocessableEntityError",
    "UploadError",
    "V1MappingError",
    "ValidationError",
    "WaitTimeoutError",
    "status_error_class",
]


class AsyncSDKError(Exception):
    """Base class of every error raised by this package."""


class ConfigurationError(AsyncSDKError):
    """The library was used wrongly: a missing API key, a closed client, an invalid option."""


class ValidationError(AsyncSDKError):
    """A request would break a rule of the service; nothing was sent."""


class UploadError(ValidationError):
    """A file to upload breaks a rule (format, size, role); names the file and the rule."""

    def __init__(self, message: str, *, filename: str | None = None) -> None:
        super().__init__(message)
        self.filename = filename


class MaskError(ValidationError):
    """A mask breaks the blue/black convention or does not fit its photo.

    ``report`` holds what was measured when the image could be read.
    """

    def __init__(self, message: str, *, report: MaskReport | None = None) -> None:
        super().__init__(message)
        self.report = report


class V1MappingError(ValidationError):
    """A V1 name or id has no known V3 counterpart; the message says what to pass instead."""


class KeyReusedError(ValidationError):
    """A keyed run's key was given again with other arguments; nothing was sent.

    ``key`` is the key; ``differences`` maps each argument that differs to ``(recorded, given)``.
    """

    def __init__(self, message: str, *, key: str, differences: Mapping[str, tuple[object, object]]):
        super().__init__(message)
        self.key = key
        self.differences = dict(differences)


class CatalogueError(ValidationError):
    """A process request does not fit the tool catalogue; nothing was sent.

    ``tool``, ``widget`` and ``item`` name what is wrong where known (``handle``: the widget's
    short name, as ``widgets=`` and the command line's ``-w NAME=VALUE`` take it); ``valid`` lists
    the accepted values (short forms) and ``suggestion`` the closest one, when there is one.
    """

    def __init__(
        self,
        message: str,
        *,
        tool: str = "",
        widget: str = "",
        item: str = "",
        valid: Iterable[str] = (),
        suggestion: str | None = None,
        handle: str = "",
    ) -> None:
        super().__init__(message)
        self.tool = tool
        self.widget = widget
        self.handle = handle
        self.item = item
        self.valid = tuple(valid)
        self.suggestion = suggestion


class UnknownToolError(CatalogueError):
    """The tool is not in the catalogue."""


class InactiveError(CatalogueError):
    """The tool, widget or item exists but is not active."""


class UnknownWidgetError(CatalogueError):
    """A widget named in the request does not belong to the tool."""


class MissingWidgetError(CatalogueError):
    """A required widget (``isOptional`` false) was not given."""


class UnknownItemError(CatalogueError):
    """An item named in the request does not belong to its widget."""


class SelectionError(CatalogueError):
    """Items that exist but cannot go together: several in a single-select widget, an item whose
    ``accessibleIn`` condition is not met, or one widget given twice."""


class InputError(CatalogueError):
    """The input images are wrong: slot names, assets missing from the order, a photo as a mask."""


class APIError(AsyncSDKError):
    """The service, or something between us and it, answered badly or not at all."""

    def __init__(self, message: str, *, method: str = "", url: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.method = method
        self.url = url


class APIStatusError(APIError):
    """A non-2xx answer. ``key`` is the service's ``api_error_...`` key, or ``""`` when absent;
    ``message`` the service's words; ``hint`` what to change, when the client can tell (a 401
    names where the key came from), or ``""``."""

    def __init__(
        self,
        message: str,
        *,
        status: int,
        key: str = "",
        headers: Mapping[str, str] | None = None,
        body: str = "",
        method: str = "",
        url: str = "",
        hint: str = "",
    ) -> None:
        super().__init__(message, method=method, url=url)
        self.status = status
        self.key = key
        # Case-insensitive, as HTTP header names are.
        self.headers: Mapping[str, str] = CIMultiDictProxy(CIMultiDict(headers or {}))
        self.body = body
        self.hint = hint

    def __str__(self) -> str:
        where = f" ({self.method} {self.url})" if self.method else ""
        key = f" [{self.key}]" if self.key else ""
        hint = f"; {self.hint}" if self.hint else ""
        return f"{self.status}{key}: {self.message}{where}{hint}"

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(status={self.status!r}, key={self.key!r}, "
            f"message={self.message!r})"
        )


class BadRequestError(APIStatusError):
    """400: a missing field, an invalid value, a wrong asset role."""


class AuthenticationError(APIStatusError):
    """401: the ``x-api-key`` header is missing or the key is invalid."""


class PermissionDeniedError(APIStatusError):
    """403: the key is valid but its plan lacks the tool or endpoint."""


class NotFoundError(APIStatusError):
    """404: the project, order, process or asset does not exist."""


class UnprocessableEntityError(APIStatusError):
    """422: asset_map keys, widget slug or item slug do not fit the tool."""


class RateLimitError(APIStatusError):
    """429: the account's rate limit was passed.

    ``retry_after``: the seconds the ``Retry-After`` header asked to wait, measured when the
    error was raised (``None`` when the answer had none).
    """

    def __init__(
        self,
        message: str,
        *,
        status: int = 429,
        key: str = "",
        headers: Mapping[str, str] | None = None,
        body: str = "",
        method: str = "",
        url: str = "",
        retry_after: float | None = None,
        hint: str = "",
    ) -> None:
        super().__init__(
            message,
            status=status,
            key=key,
            headers=headers,
            body=body,
            method=method,
            url=url,
            hint=hint,
        )
        self.retry_after = retry_after


class ServerError(APIStatusError):
    """5xx: the service or a proxy in front of it failed."""


class APIConnectionError(APIError):
    """The request could not be carried out: refused, reset, DNS failure, dropped response.

    ``request_sent`` tells whether the request may have reached the server: when it is true a
    POST was *not* retried, because repeating it could create a second, paid-for process.
    """

    def __init__(
        self, message: str, *, request_sent: bool = True, method: str = "", url: str = ""
    ) -> None:
        super().__init__(message, method=method, url=url)
        self.request_sent = request_sent


class APITimeoutError(APIConnectionError):
    """A connect or total timeout passed."""


class APIDecodeError(APIError):
    """A body that matches no model: not JSON, or JSON of the wrong shape."""

    def __init__(
        self, message: str, *, status: int = 0, body: str = "", method: str = "", url: str = ""
    ) -> None:
        super().__init__(message, method=method, url=url)
        self.status = status
        self.body = body


class ResultTooLargeError(APIError):
    """A result host sent (or announced) more than the download's ``max_bytes``: the download
    stopped, and a path target was removed (a file object keeps what was written to it)."""

    def __init__(self, message: str, *, max_bytes: int, method: str = "", url: str = "") -> None:
        super().__init__(message, method=method, url=url)
        self.max_bytes = max_bytes


class JournalError(AsyncSDKError):
    """The journal of runs could not be read or written, holds a row the library did not write
    (corrupt JSON, or a request that does not match its arguments), or the run was taken over by
    another caller after this one stopped longer than the journal's lease."""


class ProcessFailedError(AsyncSDKError):
    """A process finished with status ``failed``; ``process`` holds the final model."""

    def __init__(self, message: str, *, process: object) -> None:
        super().__init__(message)
        self.process = process


class WaitTimeoutError(AsyncSDKError, TimeoutError):
    """Waiting for a process passed its deadline. The process may still finish later."""

    def __init__(self, message: str, *, process_id: str, last_status: str | None = None) -> None:
        super().__init__(message)
        self.process_id = process_id
        self.last_status = last_status


_STATUS_CLASSES: dict[int, type[APIStatusError]] = {
    400: BadRequestError,
    401: AuthenticationError,
    403: PermissionDeniedError,
    404: NotFoundError,
    422: UnprocessableEntityError,
    429: RateLimitError,
}


def status_error_class(status: int) -> type[APIStatusError]:
    """The exception class for an HTTP status (``APIStatusError`` for the unnamed ones)."""
    if status >= 500:
        return ServerError
    return _STATUS_CLASSES.get(status, APIStatusError)
