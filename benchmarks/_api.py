"""The minimal stand-in of the service used by the client and upload benchmarks.

Answers only what those benchmarks call, with canned bodies in the documented shapes, as cheaply
as aiohttp allows so that the client side is what gets measured:

* ``POST /v3/process``: reads the JSON body, answers 201 ``{"process_ids": [...]}``;
* ``GET /v3/process/{id}``: 200, a finished process with one result;
* ``POST /v3/order``: counts the multipart body as it streams in (nothing is kept), checks it ends
  with the closing boundary, answers 201 ``{"order_id", "assets"}``;
* ``GET /api/tools`` and ``GET /v1/cathub/tools/{slug}/widgets``: the sandbox's catalogue, which
  the client reads (once per TTL) to validate process requests.

Every route but the tool list wants the ``x-api-key`` header (401 without).
"""

from __future__ import annotations

import itertools
import json
from typing import Any, Final

from aiohttp import web

from benchmarks._child import ChildIO

API_KEY: Final = "sk_bench_key"

_CREATED: Final = json.dumps({"process_ids": ["proc-bench-1"]}).encode()
_PROCESS: Final = json.dumps(
    {
        "id": "proc-bench-1",
        "tool": "tool-virtual-staging",
        "status": "done",
        "final_assets": [
            {
                "asset_id": "asset-result-1",
                "asset_type": "image",
                "asset_role": "result",
                "src": "https://files.example.com/result/asset-result-1.jpg?token=abc123",
                "thumbnail_src": "https://files.example.com/result/asset-result-1-thumb.jpg",
            }
        ],
        "bookmarked": False,
        "feedback": {"type": "", "description": ""},
    }
).encode()
_UNAUTHORIZED: Final = json.dumps(
    {"error": "missing or invalid x-api-key", "key": "api_error_unauthorized"}
).encode()
_JSON: Final = "application/json"


def _unauthorized() -> web.Response:
    return web.Response(status=401, body=_UNAUTHORIZED, content_type=_JSON)


async def _create_process(request: web.Request) -> web.Response:
    if request.headers.get("x-api-key") != API_KEY:
        return _unauthorized()
    await request.read()
    return web.Response(status=201, body=_CREATED, content_type=_JSON)


async def _get_process(request: web.Request) -> web.Response:
    if request.headers.get("x-api-key") != API_KEY:
        return _unauthorized()
    return web.Response(status=200, body=_PROCESS, content_type=_JSON)


_orders = itertools.count(1)


async def _create_order(request: web.Request) -> web.Response:
    if request.headers.get("x-api-key") != API_KEY:
        return _unauthorized()
    content_type = request.headers.get("Content-Type", "")
    boundary = content_type.partition("boundary=")[2].strip('"')
    if not content_type.startswith("multipart/form-data") or not boundary:
        return web.json_response({"error": "want multipart/form-data"}, status=400)
    size = 0
    tail = b""
    while chunk := await request.content.readany():
        size += len(chunk)
        tail = (tail + chunk[-256:])[-256:]
    closing = f"--{boundary}--".encode()
    if closing not in tail:
        return web.json_response(
            {"error": "multipart body without its closing boundary"}, status=400
        )
    number = next(_orders)
    body: dict[str, Any] = {
        "order_id": f"order-{number}",
        "assets": [
            {
                "id": f"asset-{number}",
                "src": f"https://files.example.com/in/asset-{number}.jpg",
                "asset_type": "image",
                "asset_role": "primary_angle",
            }
        ],
        "received_bytes": size,
    }
    return web.Response(status=201, body=json.dumps(body).encode(), content_type=_JSON)


def _catalogue_routes(app: web.Application) -> None:
    from asyncsdk.sandbox._catalogue_data import CATALOGUE

    tools = json.dumps({"data": [tool.wire() for tool in CATALOGUE.tools]}).encode()

    async def list_tools(request: web.Request) -> web.Response:
        return web.Response(body=tools, content_type=_JSON)

    async def tool_widgets(request: web.Request) -> web.Response:
        if request.headers.get("x-api-key") != API_KEY:
            return _unauthorized()
        tool = CATALOGUE.resolve(request.match_info["slug"])
        if tool is None:
            return web.json_response({"error": "no such tool", "key": "api_error_tool"}, status=404)
        base = str(request.url.origin())
        data = {"data": [widget.wire(base) for widget in tool.widgets], "message": ""}
        return web.json_response(data)

    app.router.add_get("/api/tools", list_tools)
    app.router.add_get("/v1/cathub/tools/{slug}/widgets", tool_widgets)


async def serve(io: ChildIO, port: int = 0) -> None:
    """Serve on 127.0.0.1 until the parent says stop."""
    app = web.Application()
    _catalogue_routes(app)
    app.router.add_post("/v3/process", _create_process)
    app.router.add_get("/v3/process/{id}", _get_process)
    app.router.add_post("/v3/order", _create_order)
    runner = web.AppRunner(app, access_log=None, handle_signals=False)
    await runner.setup()
    try:
        site = web.TCPSite(runner, "127.0.0.1", port, backlog=1024)
        await site.start()
        bound = runner.addresses[0][1]
        io.ready({"base_url": f"http://127.0.0.1:{bound}", "api_key": API_KEY})
        await io.stopped()
    finally:
        await runner.cleanup()
