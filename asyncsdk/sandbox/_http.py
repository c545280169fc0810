"""What every handler of the sandbox shares: its runtime, the caller's key, URLs, answers.

The success envelope (``enveloped`` setting) is written in one place, :func:`success`; error
bodies are ``{"error": ..., "key": ...}`` (:func:`error_response`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Final

from aiohttp import web

from asyncsdk.sandbox._live import Runtime
from asyncsdk.sandbox._records import SandboxError, parse_size
from asyncsdk.sandbox._wire import Urls

__all__ = [
    "RUNTIME",
    "Handler",
    "api_key",
    "drop_connection",
    "error_response",
    "file_urls",
    "json_body",
    "route_name",
    "runtime_of",
    "success",
]

RUNTIME: Final = web.AppKey("runtime", Runtime)
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def runtime_of(request: web.Request) -> Runtime:
    return request.app[RUNTIME]


def api_key(request: web.Request) -> str:
    return runtime_of(request).state.authenticate(request.headers.get("x-api-key"))


def file_urls(request: web.Request, *, sized: bool = False) -> Urls:
    base = str(request.url.origin())
    if not sized:
        return Urls(base)
    width, height = parse_size(request.query)
    return Urls(base, width=width, height=height)


def success(request: web.Request, payload: dict[str, Any], status: int = 200) -> web.Response:
    """A success answer, bare or in the live API's envelope (``enveloped`` setting)."""
    if runtime_of(request).config.enveloped:
        if "data" in payload:
            payload = {**payload, "message": "ok"}
        else:
            payload = {"data": payload, "message": "ok"}
    return web.json_response(payload, status=status)


def error_response(
    status: int, body: dict[str, str], headers: dict[str, str] | None = None
) -> web.Response:
    return web.json_response(body, status=status, headers=headers)


async def json_body(request: web.Request) -> Any:
    """The JSON body of an API call, which must say it is JSON (spec 4.1, 4.8: Content-Type
    application/json): a JSON parser in front of the service reads no other body."""
    kind = request.content_type
    if kind != "application/json" and not kind.endswith("+json"):
        sent = request.headers.get("Content-Type") or "no content type"
        raise SandboxError(
            400,
            "api_error_invalid_json",
            f"send the body as JSON with Content-Type: application/json, not {sent}",
        )
    try:
        return await request.json()
    except (ValueError, UnicodeDecodeError):
        raise SandboxError(
            400, "api_error_invalid_json", "the body is not valid JSON; send application/json"
        ) from None


def route_name(request: web.Request) -> str:
    route = request.match_info.route
    resource = route.resource
    return resource.canonical if resource is not None else request.path


def drop_connection(request: web.Request) -> web.Response:
    """Close the connection without an answer (the write of the returned response fails quietly)."""
    if request.transport is not None:
        request.transport.close()
    return web.Response(status=204)
