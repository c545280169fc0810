"""Building a request (no I/O): the :class:`Request` the transport carries out, its URL, its query.

A request with an upload carries a :class:`FormBody` (the multipart form of ``_uploads.py``); the
transport opens it once per attempt and asks it whether it may be sent again.
"""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager
from typing import Any, Protocol
from urllib.parse import quote

import attrs
from yarl import URL

from asyncsdk._errors import UploadError

__all__ = ["FormBody", "Request", "endpoint", "query"]


class FormBody(Protocol):
    """A request body built afresh for each attempt."""

    @property
    def replayable(self) -> bool:
        """Whether the body can be sent again (a streamed upload cannot)."""

    @property
    def failure(self) -> UploadError | None:
        """The rule the body broke while it was being sent, if any."""

    def open(self) -> AbstractAsyncContextManager[Any]:
        """The body of one attempt (what aiohttp takes as ``data=``), closed on exit."""

    async def close_unsent(self) -> None:
        """Close what the caller gave that no attempt sent (their async iterators)."""


@attrs.frozen(kw_only=True)
class Request:
    """One request, fully built: the transport only carries it out."""

    method: str
    url: URL
    json: Any = None
    form: FormBody | None = None
    authenticated: bool = True
    #: A process creation: a 429 without ``Retry-After`` is the generation limit, which no quick
    #: retry can pass, so the transport leaves it to the generation limiter.
    generation: bool = False
    #: The key of a poll floor (a process id): attempts with the same key are sent at least the
    #: client's ``min_poll_interval`` apart, retries included.
    floor_key: str | None = None
    #: The route template of ``url`` (``/v3/process/{process_id}``) when its builder knows it;
    #: telemetry works it out from the URL otherwise.
    route: str | None = None

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
