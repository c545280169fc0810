"""The aiohttp application of the sandbox and the one middleware every request goes through.

:func:`edge` counts requests, carries out chaos rules and turns
:class:`~asyncsdk.sandbox._records.SandboxError` into ``{"error": ..., "key": ...}`` answers.
The routes live in ``_api.py`` (the service's endpoints), ``_control_routes.py``
(``/_sandbox/``) and ``_cockpit.py`` (the page at ``/_sandbox/``).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Final

from aiohttp import web

from asyncsdk.sandbox import _api, _cockpit, _control_routes
from asyncsdk.sandbox._chaos import ChaosKind, ChaosRule
from asyncsdk.sandbox._control_routes import require_local
from asyncsdk.sandbox._http import (
    RUNTIME,
    Handler,
    drop_connection,
    error_response,
    route_name,
    runtime_of,
)
from asyncsdk.sandbox._live import Runtime
from asyncsdk.sandbox._records import RATE_LIMIT_MESSAGE, SandboxError

__all__ = ["build_app"]

HTML_PAGE: Final = (
    "<html>\r\n<head><title>{status} Bad Gateway</title></head>\r\n<body>\r\n"
    "<center><h1>{status} Bad Gateway</h1></center>\r\n<hr><center>nginx</center>\r\n"
    "</body>\r\n</html>\r\n"
)


async def _before(request: web.Request, rule: ChaosRule) -> web.StreamResponse | None:
    headers = {}
    if rule.retry_after is not None:
        headers["Retry-After"] = str(rule.retry_after)
    if rule.kind == ChaosKind.STATUS:
        status = rule.effective_status
        return error_response(
            status,
            {"error": f"sandbox chaos: HTTP {status}", "key": "api_error_service_unavailable"},
            headers,
        )
    if rule.kind == ChaosKind.RATE_LIMIT:
        return error_response(rule.effective_status, {"error": RATE_LIMIT_MESSAGE}, headers)
    if rule.kind == ChaosKind.HTML:
        status = rule.effective_status
        return web.Response(
            status=status,
            text=HTML_PAGE.format(status=status),
            content_type="text/html",
            headers=headers,
        )
    if rule.kind == ChaosKind.DROP_BEFORE:
        return drop_connection(request)
    if rule.kind == ChaosKind.SLOW:
        await asyncio.sleep(rule.delay)
    return None


async def _after(
    request: web.Request, rule: ChaosRule, response: web.StreamResponse
) -> web.StreamResponse:
    if rule.kind == ChaosKind.DROP_AFTER:
        return drop_connection(request)
    if not isinstance(response, web.Response) or not isinstance(response.body, bytes):
        return response
    body = response.body
    if rule.kind == ChaosKind.TRUNCATED_JSON:
        return web.Response(
            status=response.status,
            body=body[: max(1, len(body) // 2)],
            content_type=response.content_type,
        )
    # slow body: headers now, the body in five slices spread over ``delay`` seconds
    stream = web.StreamResponse(status=response.status)
    stream.content_type = response.content_type
    stream.content_length = len(body)
    await stream.prepare(request)
    step = max(1, len(body) // 5 + 1)
    for start in range(0, len(body), step):
        await asyncio.sleep(rule.delay / 5)
        await stream.write(body[start : start + step])
    await stream.write_eof()
    return stream


@web.middleware
async def edge(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Counting, chaos, error bodies: the one way every request goes through."""
    rt = runtime_of(request)
    if not rt.public_base:
        rt.public_base = str(request.url.origin())
    internal = request.path == "/_sandbox" or request.path.startswith("/_sandbox/")
    rule = None
    if not internal:
        rt.stats.requests[f"{request.method} {route_name(request)}"] += 1
        rule = rt.chaos.pick(request.method, request.path, route_name(request))
    if rule is not None:
        rt.stats.chaos_fired[rule.kind] += 1
        if rule.kind not in ChaosKind.AFTER:
            early = await _before(request, rule)
            if early is not None:
                return early
    try:
        if internal:
            require_local(request, rt.config.control_hosts)
        response = await handler(request)
    except SandboxError as exc:
        response = error_response(exc.status, exc.body())
    except web.HTTPNotFound:
        response = error_response(
            404,
            {
                "error": f"no endpoint {request.method} {request.path}",
                "key": "api_error_not_found",
            },
        )
    except web.HTTPMethodNotAllowed as exc:
        response = error_response(
            405,
            {
                "error": f"{request.method} is not allowed on {request.path}; "
                f"use {', '.join(sorted(exc.allowed_methods))}",
                "key": "api_error_method_not_allowed",
            },
        )
    if rule is not None and rule.kind in ChaosKind.AFTER:
        return await _after(request, rule, response)
    return response


def build_app(runtime: Runtime) -> web.Application:
    """The application; its ``cleanup_ctx`` starts and stops ``runtime`` with it."""
    app = web.Application(middlewares=[edge])
    app[RUNTIME] = runtime

    async def lifecycle(_: web.Application) -> AsyncIterator[None]:
        await runtime.start()
        yield
        await runtime.stop()

    app.cleanup_ctx.append(lifecycle)
    _api.add_routes(app.router)
    _control_routes.add_routes(app.router)
    _cockpit.add_routes(app.router)
    return app
