"""The aiohttp adapter of the request path: an aiohttp request in, the answer of
:class:`~webhooks._intake.Intake` out as an aiohttp response."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from aiohttp import web
from aiohttp.compression_utils import HAS_BROTLI, HAS_ZSTD
from multidict import CIMultiDictProxy

from webhooks._intake import Answer, BodyUnreadable, Intake

__all__ = ["INTAKE_KEY", "AiohttpIntake"]

_READ_CHUNK: Final = 64 * 1024
_UNREADABLE: Final = (OSError, ValueError, web.HTTPException, web.RequestPayloadError)
"""What reading an aiohttp body raises (RequestPayloadError: a body that does not decode as its
Content-Encoding says)."""


def _lower_case(headers: CIMultiDictProxy[str]) -> dict[str, str]:
    """The request's headers as a verifier sees them: lower-case names, the first value of each."""
    lowered: dict[str, str] = {}
    for name, value in headers.items():
        lowered.setdefault(name.lower(), value)
    return lowered


DECODABLE: Final = (
    "gzip",
    "deflate",
    *(("br",) if HAS_BROTLI else ()),
    *(("zstd",) if HAS_ZSTD else ()),
)
"""The codings aiohttp's server decodes before the receiver reads the body (br and zstd only
with their decoders installed: without them aiohttp refuses the request before any route runs,
and ``webhooks._server_log`` says in one line what it logged with a traceback)."""


class _RequestBody:
    """An aiohttp request's body as :class:`~webhooks._intake.Body`."""

    __slots__ = ("_content",)
    decoded: Final = DECODABLE

    def __init__(self, request: web.Request) -> None:
        self._content = request.content

    def arrived(self) -> bytes | None:
        content = self._content
        if not content.is_eof():
            return None
        try:
            return content.read_nowait()
        except _UNREADABLE as exc:
            raise BodyUnreadable(type(exc).__name__) from exc

    async def chunk(self) -> bytes:
        try:
            return await self._content.read(_READ_CHUNK)
        except _UNREADABLE as exc:
            raise BodyUnreadable(type(exc).__name__) from exc


class AiohttpIntake:
    """Route handlers of one receiver's :class:`~webhooks._intake.Intake` on aiohttp."""

    __slots__ = ("intake",)

    def __init__(self, intake: Intake[Any]) -> None:
        self.intake = intake

    async def handle(self, request: web.Request) -> web.StreamResponse:
        """The sub-application's route handler: the token (if any) comes from the matched route."""
        return await self.receive(request.match_info, request)

    async def receive(
        self, path_params: Mapping[str, str], request: web.Request, *, token_routed: bool = False
    ) -> web.StreamResponse:
        """One delivery; ``token_routed`` as :meth:`~webhooks._intake.Intake.deliver` takes it."""
        answer: Answer = await self.intake.deliver(
            path_params,
            _lower_case(request.headers),
            _RequestBody(request),
            token_routed=token_routed,
        )
        response = web.Response(status=answer.status, body=answer.body, headers=answer.headers)
        if answer.close:
            content = request.content
            if content.exception() is not None:
                # aiohttp reads what is left of a body after the answer, to keep the connection;
                # a body that already failed to decode would then be logged as an unhandled
                # exception.  It is marked ended here: nothing more is read.
                content.feed_eof()
            response.force_close()
        return response


INTAKE_KEY: Final = web.AppKey("webhooks.intake", Intake[Any])
"""Marks a receiver's own application (the one :attr:`WebhookReceiver.app` builds)."""
