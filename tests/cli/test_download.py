"""Result downloads: http(s) only, streamed, never a partial file under the final name."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest
from aiohttp import web

from asyncsdk._cli._common import download
from asyncsdk._cli._local import serve_app
from asyncsdk._errors import APIError, NotFoundError

PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 200_000


@pytest.fixture
async def server() -> AsyncIterator[str]:
    async def image(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "image/png"})
        await response.prepare(request)
        for start in range(0, len(PNG), 50_000):
            await response.write(PNG[start : start + 50_000])
        await response.write_eof()
        return response

    async def cut(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "image/jpeg"})
        response.content_length = 100_000
        await response.prepare(request)
        await response.write(b"\xff\xd8\xff" + b"\x00" * 1000)
        request.transport.close()  # type: ignore[union-attr]
        return response

    app = web.Application()
    app.router.add_get("/result", image)
    app.router.add_get("/cut", cut)
    async with serve_app(app, "127.0.0.1", 0) as port:
        yield f"http://127.0.0.1:{port}"


async def test_streams_to_a_file_named_by_content_type(server: str, tmp_path: Path) -> None:
    async with aiohttp.ClientSession() as session:
        path = await download(session, f"{server}/result?sig=abc", tmp_path / "out", "room--x")
    assert path == tmp_path / "out" / "room--x.png"
    assert path.read_bytes() == PNG
    assert [p.name for p in (tmp_path / "out").iterdir()] == ["room--x.png"]


@pytest.mark.parametrize(
    "url", ["file:///etc/passwd", "ftp://example.com/a.jpg", "data:image/png;base64,AAAA", "/x"]
)
async def test_refuses_urls_that_are_not_http(url: str, tmp_path: Path) -> None:
    async with aiohttp.ClientSession() as session:
        with pytest.raises(APIError, match="only http:// and https://"):
            await download(session, url, tmp_path, "x")
    assert os.listdir(tmp_path) == []


async def test_http_errors_and_cut_transfers_leave_nothing(server: str, tmp_path: Path) -> None:
    async with aiohttp.ClientSession() as session:
        with pytest.raises(NotFoundError):
            await download(session, f"{server}/missing", tmp_path, "a")
        with pytest.raises(APIError, match="failed"):
            await download(session, f"{server}/cut", tmp_path, "b")
    assert os.listdir(tmp_path) == []
