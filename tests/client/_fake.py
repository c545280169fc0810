"""A small scripted fake of the service on 127.0.0.1 (port 0) and canned answers.

``fake.script(method, path, *replies)`` queues answers for one route; the last one repeats.  A reply
is a :class:`Reply` or an async handler ``(request) -> web.StreamResponse``.  Every request is
recorded in ``fake.seen`` (method, path, query, headers, body or multipart parts, arrival time), and
``fake.max_in_flight`` is the largest number of requests the fake was handling at once.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from typing import Any

import aiohttp
import attrs
from aiohttp import web
from multidict import CIMultiDict
from yarl import URL

API_KEY = "sk_test_0123456789abcdef_SECRET"
JPEG = b"\xff\xd8\xff\xe0\x00\x10JFIF\x00" + bytes(range(256)) * 4
PNG = b"\x89PNG\r\n\x1a\n" + bytes(200)
WEBP = b"RIFF\x00\x01\x00\x00WEBPVP8 " + bytes(200)

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@attrs.frozen(kw_only=True)
class Reply:
    """One scripted answer.  ``action``: ``respond``, ``drop`` (close the connection after reading
    the request), ``cut`` (announce a body, send part of it, close), ``hang`` (answer only when
    the fake stops)."""

    status: int = 200
    json: Any = None
    text: str | None = None
    headers: dict[str, str] = attrs.field(factory=dict)
    content_type: str = "text/html"
    action: str = "respond"
    delay: float = 0.0


@attrs.frozen(kw_only=True)
class Part:
    name: str
    filename: str | None
    content_type: str
    data: bytes

    @property
    def text(self) -> str:
        return self.data.decode()


@attrs.frozen(kw_only=True)
class Seen:
    method: str
    path: str
    raw_path: str
    query: dict[str, str]
    headers: CIMultiDict[str]
    body: bytes
    parts: tuple[Part, ...]
    at: float

    def json(self) -> Any:
        return json.loads(self.body)

    def fields(self, name: str) -> list[str]:
        return [part.text for part in self.parts if part.name == name and part.filename is None]

    def files(self, name: str = "asset_file") -> list[Part]:
        return [part for part in self.parts if part.name == name and part.filename is not None]


class FakeService:
    def __init__(self) -> None:
        self.seen: list[Seen] = []
        self.url = URL()
        self.in_flight = 0
        self.max_in_flight = 0
        self.stopping = asyncio.Event()
        self._scripts: dict[tuple[str, str], list[Reply | Handler]] = {}
        self._runner: web.AppRunner | None = None

    def script(self, method: str, path: str, *replies: Reply | Handler) -> None:
        self._scripts[(method.upper(), path)] = list(replies)

    def requests(self, method: str, path: str) -> list[Seen]:
        return [seen for seen in self.seen if seen.method == method and seen.path == path]

    async def start(self, port: int = 0) -> None:
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_route("*", "/{tail:.*}", self._handle)
        self._runner = web.AppRunner(app, shutdown_timeout=1.0)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", port)
        await site.start()
        host, port = self._runner.addresses[0][:2]
        self.url = URL.build(scheme="http", host=host, port=port)

    async def stop(self) -> None:
        self.stopping.set()
        if self._runner is not None:
            await self._runner.cleanup()

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            return await self._answer(request)
        finally:
            self.in_flight -= 1

    async def _answer(self, request: web.Request) -> web.StreamResponse:
        key = (request.method, request.path)
        replies = self._scripts.get(key)
        if not replies:
            await request.read()
            self._record(request, b"", ())
            return web.json_response(
                {"error": f"no script for {request.method} {request.path}", "key": "api_error_x"},
                status=404,
            )
        reply = replies.pop(0) if len(replies) > 1 else replies[0]
        if not isinstance(reply, Reply):
            return await reply(request)
        body, parts = await self._read(request)
        self._record(request, body, parts)
        if reply.delay:
            await asyncio.sleep(reply.delay)
        if reply.action == "drop":
            assert request.transport is not None
            request.transport.close()
            return web.Response(status=204)
        if reply.action == "hang":
            await self.stopping.wait()
            return web.Response(status=503)
        if reply.action == "cut":
            response = web.StreamResponse(status=reply.status, headers=reply.headers)
            response.content_type = "application/json"
            response.content_length = 1000
            await response.prepare(request)
            await response.write(b'{"id": "cut-short", ')
            assert request.transport is not None
            request.transport.close()
            return response
        if reply.text is not None:
            return web.Response(
                status=reply.status,
                text=reply.text,
                headers=reply.headers,
                content_type=reply.content_type,
            )
        return web.json_response(reply.json, status=reply.status, headers=reply.headers)

    async def _read(self, request: web.Request) -> tuple[bytes, tuple[Part, ...]]:
        if not request.content_type.startswith("multipart/"):
            return await request.read(), ()
        reader = await request.multipart()
        parts: list[Part] = []
        async for part in reader:
            assert isinstance(part, aiohttp.BodyPartReader)
            parts.append(
                Part(
                    name=part.name or "",
                    filename=part.filename,
                    content_type=part.headers.get("Content-Type", ""),
                    data=bytes(await part.read()),
                )
            )
        return b"", tuple(parts)

    def _record(self, request: web.Request, body: bytes, parts: tuple[Part, ...]) -> None:
        self.seen.append(
            Seen(
                method=request.method,
                path=request.path,
                raw_path=request.raw_path,
                query=dict(request.query),
                headers=CIMultiDict(request.headers),
                body=body,
                parts=parts,
                at=asyncio.get_running_loop().time(),
            )
        )

    def record(self, request: web.Request, body: bytes = b"") -> None:
        """Record a request handled by a custom handler."""
        self._record(request, body, ())


def pagination(page: int, total_pages: int, limit: int = 2) -> dict[str, Any]:
    return {
        "page": page,
        "limit": limit,
        "total_count": total_pages * limit,
        "total_pages": total_pages,
        "previous_page": f"?page={page - 1}&limit={limit}" if page > 1 else "",
        "next_page": f"?page={page + 1}&limit={limit}" if page < total_pages else "",
    }


def project_json(project_id: str = "p1", address: str = "12 Oak Street") -> dict[str, Any]:
    return {
        "id": project_id,
        "address": address,
        "cover_src": "",
        "input_count": 0,
        "result_count": 0,
        "bookmarked_count": 0,
        "default": False,
        "updated_at": "2025-01-31",
    }


def process_json(process_id: str = "pr1", status: str = "pending", **extra: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "id": process_id,
        "tool": "tool-virtual-staging",
        "status": status,
        "final_assets": [],
        "bookmarked": False,
        "feedback": {"type": "", "description": ""},
    }
    if status == "done":
        body["final_assets"] = [
            {
                "asset_id": "r1",
                "asset_type": "image",
                "asset_role": "result",
                "src": "https://cdn.example/r1.jpg",
                "thumbnail_src": "https://cdn.example/r1_t.jpg",
            }
        ]
    body.update(extra)
    return body


def created_order_json(order_id: str = "o1", count: int = 1) -> dict[str, Any]:
    return {
        "order_id": order_id,
        "assets": [
            {
                "id": f"a{n}",
                "src": f"https://cdn.example/a{n}.jpg",
                "asset_type": "image",
                "asset_role": "primary_angle" if n == 0 else "secondary_angle",
            }
            for n in range(count)
        ],
    }
