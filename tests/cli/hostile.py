"""A hostile service for the command line: the sandbox behind a proxy that rewrites its answers.

Every request is passed on to the sandbox as it came; the JSON of each process the proxy hands
back goes through ``rewrite`` first (a crafted ``tool``, result URLs of the proxy's own ``/files/``
routes...).  The proxy is an aiohttp app on 127.0.0.1, port 0.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable
from typing import Any

import aiohttp
from aiohttp import web

from asyncsdk.sandbox import Sandbox

Rewrite = Callable[[dict[str, Any], str], dict[str, Any]]

PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 200_000
_HOP_HEADERS = frozenset({"host", "content-length", "transfer-encoding", "connection"})


async def _png(request: web.Request) -> web.StreamResponse:
    response = web.StreamResponse(headers={"Content-Type": "image/png"})
    await response.prepare(request)
    for start in range(0, len(PNG), 50_000):
        await response.write(PNG[start : start + 50_000])
    await response.write_eof()
    return response


async def _cut(request: web.Request) -> web.StreamResponse:
    response = web.StreamResponse(headers={"Content-Type": "image/jpeg"})
    response.content_length = 100_000
    await response.prepare(request)
    await response.write(b"\xff\xd8\xff" + b"\x00" * 1000)
    assert request.transport is not None
    request.transport.close()
    return response


async def _missing(request: web.Request) -> web.StreamResponse:
    return web.Response(status=404, text="no such result")


def _is_process(value: Any) -> bool:
    return isinstance(value, dict) and "tool" in value and "final_assets" in value


def _rewritten(body: Any, rewrite: Rewrite, base: str) -> Any:
    """``body`` with every process in it rewritten (bare, in an envelope, or in a list)."""
    if _is_process(body):
        return rewrite(body, base)
    if isinstance(body, dict):
        return {key: _rewritten(value, rewrite, base) for key, value in body.items()}
    if isinstance(body, list):
        return [_rewritten(item, rewrite, base) for item in body]
    return body


@contextlib.asynccontextmanager
async def hostile_service(sandbox: Sandbox, rewrite: Rewrite) -> AsyncIterator[str]:
    """Serve the proxy and yield its base URL; its result files are at ``BASE/files/...``."""
    async with aiohttp.ClientSession() as session:

        async def forward(request: web.Request) -> web.StreamResponse:
            headers = {k: v for k, v in request.headers.items() if k.lower() not in _HOP_HEADERS}
            async with session.request(
                request.method,
                sandbox.base_url + request.rel_url.path_qs,
                headers=headers,
                data=await request.read(),
                allow_redirects=False,
            ) as answer:
                body = await answer.read()
                if answer.content_type == "application/json" and request.method == "GET":
                    base = f"http://{request.host}"
                    changed = _rewritten(await answer.json(), rewrite, base)
                    return web.json_response(changed, status=answer.status)
                return web.Response(
                    body=body, status=answer.status, content_type=answer.content_type
                )

        app = web.Application()
        app.router.add_get("/files/result.png", _png)
        app.router.add_get("/files/cut.jpg", _cut)
        app.router.add_get("/files/missing.jpg", _missing)
        app.router.add_route("*", "/{tail:.*}", forward)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        try:
            port = runner.addresses[0][1]
            yield f"http://127.0.0.1:{port}"
        finally:
            await runner.cleanup()
