"""What a hostile result host can do to ``Client.download``: not fill the disk, not redirect it."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from aiohttp import web

from asyncsdk import Client, ResultTooLargeError, ValidationError

CHUNK = b"\xff" * 65536


class ResultHost:
    """A result host on 127.0.0.1: ``/endless`` streams without end, ``/huge`` announces a
    terabyte, ``/small`` is 10 bytes, ``/to-local`` redirects to ``localhost``."""

    def __init__(self) -> None:
        self.sent = 0
        self.port = 0

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_get("/endless", self.endless)
        app.router.add_get("/huge", self.huge)
        app.router.add_get("/small", self.small)
        app.router.add_get("/to-local", self.to_local)
        return app

    async def endless(self, request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse()
        await response.prepare(request)
        while True:
            await response.write(CHUNK)
            self.sent += len(CHUNK)

    async def huge(self, request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Length": str(10**12)})
        await response.prepare(request)
        await response.write(CHUNK)
        self.sent += len(CHUNK)
        await asyncio.sleep(60)
        return response

    async def small(self, _: web.Request) -> web.Response:
        return web.Response(body=b"0123456789", content_type="image/jpeg")

    async def to_local(self, _: web.Request) -> web.Response:
        raise web.HTTPFound(f"http://localhost:{self.port}/small")


@pytest.fixture
async def host() -> AsyncIterator[tuple[ResultHost, str]]:
    fake = ResultHost()
    runner = web.AppRunner(fake.app(), handle_signals=False, shutdown_timeout=0.1)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    fake.port = runner.addresses[0][1]
    try:
        yield fake, f"http://127.0.0.1:{fake.port}"
    finally:
        await runner.cleanup()


@pytest.fixture
async def client() -> AsyncIterator[Client]:
    async with Client(api_key="sk_test_downloads", base_url="http://127.0.0.1:9") as sdk:
        yield sdk


async def test_an_endless_result_stops_at_the_default_cap_and_leaves_no_file(
    host: tuple[ResultHost, str], client: Client, tmp_path: Path
) -> None:
    fake, base = host
    target = tmp_path / "result.jpg"
    async with asyncio.timeout(60):  # a guard: without a cap the download never ends
        with pytest.raises(ResultTooLargeError, match="max_bytes") as info:
            await client.download(f"{base}/endless", target, timeout=120)
    assert info.value.max_bytes == 100 * 1024 * 1024
    assert fake.sent <= 110 * 1024 * 1024
    assert sorted(tmp_path.iterdir()) == []  # noqa: ASYNC240 - a tmp folder listing


async def test_a_smaller_cap_stops_the_stream_sooner(
    host: tuple[ResultHost, str], client: Client, tmp_path: Path
) -> None:
    _, base = host
    with pytest.raises(ResultTooLargeError):
        await client.download(f"{base}/endless", tmp_path / "r.jpg", max_bytes=200_000)
    assert sorted(tmp_path.iterdir()) == []  # noqa: ASYNC240 - a tmp folder listing
    assert await client.download(f"{base}/small", tmp_path / "ok.jpg", max_bytes=10) == 10
    with pytest.raises(ValidationError, match="max_bytes must be a positive"):
        await client.download(f"{base}/small", tmp_path / "no.jpg", max_bytes=0)


async def test_an_announced_length_over_the_cap_is_refused_before_reading(
    host: tuple[ResultHost, str], client: Client, tmp_path: Path
) -> None:
    _, base = host
    # The body stalls after one chunk: only the announced length can stop this in time.
    async with asyncio.timeout(10):
        with pytest.raises(ResultTooLargeError):
            await client.download(f"{base}/huge", tmp_path / "r.jpg")
    assert sorted(tmp_path.iterdir()) == []  # noqa: ASYNC240 - a tmp folder listing


async def test_allowed_hosts_refuse_other_hosts_and_redirects_to_them(
    host: tuple[ResultHost, str], client: Client, tmp_path: Path
) -> None:
    fake, base = host
    # Without a list, the redirect to localhost is followed (the sandbox's results live there).
    assert await client.download(f"{base}/to-local", tmp_path / "a.jpg") == 10
    with pytest.raises(ValidationError, match="'localhost': not in allowed_hosts"):
        await client.download(f"{base}/to-local", tmp_path / "b.jpg", allowed_hosts=["127.0.0.1"])
    with pytest.raises(ValidationError, match="not in allowed_hosts"):
        await client.download(
            f"http://localhost:{fake.port}/small", tmp_path / "c.jpg", allowed_hosts=[".example"]
        )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.jpg"]  # noqa: ASYNC240
