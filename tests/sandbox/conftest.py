"""Shared helpers: images, an authenticated session on the sandbox, and shortcuts for the flow."""

from __future__ import annotations

import io
from collections.abc import AsyncIterator, Sequence
from typing import Any

import aiohttp
import pytest
from PIL import Image

from asyncsdk.sandbox import Sandbox

LIMITED_KEY = "sk_sandbox_limited"


def image_bytes(
    fmt: str = "JPEG",
    size: tuple[int, int] = (160, 120),
    colour: tuple[int, int, int] = (90, 140, 200),
) -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", size, colour).save(buf, fmt)
    return buf.getvalue()


def gradient_jpeg(size: tuple[int, int] = (160, 120)) -> bytes:
    img = Image.new("RGB", size)
    img.putdata(
        [
            (x * 255 // size[0], y * 255 // size[1], 128)
            for y in range(size[1])
            for x in range(size[0])
        ]
    )
    buf = io.BytesIO()
    img.save(buf, "JPEG", quality=95)
    return buf.getvalue()


def order_form(
    files: Sequence[bytes],
    roles: Sequence[str] = (),
    *,
    role_field: str = "asset_role",
    project_id: str | None = None,
) -> aiohttp.FormData:
    form = aiohttp.FormData()
    if project_id is not None:
        form.add_field("project_id", project_id)
    for n, data in enumerate(files):
        form.add_field("asset_file", data, filename=f"photo{n}.jpg", content_type="image/jpeg")
    for role in roles:
        form.add_field(role_field, role)
    return form


async def error_of(response: aiohttp.ClientResponse) -> dict[str, Any]:
    body = await response.json()
    assert set(body) == {"error", "key"}, body
    assert body["key"].startswith("api_error_")
    return dict(body)


@pytest.fixture
async def api(sandbox: Sandbox) -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession(
        base_url=sandbox.base_url, headers={"x-api-key": sandbox.api_key}
    ) as session:
        yield session


class Flow:
    """Shortcuts over raw HTTP for tests that need a project, an order or a process."""

    def __init__(self, session: aiohttp.ClientSession) -> None:
        self.session = session

    async def project(self, address: str = "1 Harbour Street") -> dict[str, Any]:
        async with self.session.post("/v3/project", json={"address": address}) as r:
            assert r.status == 201, await r.text()
            return dict(await r.json())

    async def order(
        self,
        files: Sequence[bytes] | None = None,
        roles: Sequence[str] = (),
        project_id: str | None = None,
    ) -> dict[str, Any]:
        form = order_form(files or [gradient_jpeg()], roles, project_id=project_id)
        async with self.session.post("/v3/order", data=form) as r:
            assert r.status == 201, await r.text()
            return dict(await r.json())

    async def append_mask(self, order_id: str, data: bytes) -> dict[str, Any]:
        form = aiohttp.FormData()
        form.add_field("asset_file", data, filename="mask.png", content_type="image/png")
        form.add_field("asset_role", "mask")
        form.add_field("asset_type", "mask")
        async with self.session.post(f"/v3/order/{order_id}/append", data=form) as r:
            assert r.status == 201, await r.text()
            return dict(await r.json())

    async def process(
        self,
        tool: str = "tool-day-to-dusk",
        order: dict[str, Any] | None = None,
        widgets: list[dict[str, Any]] | None = None,
    ) -> str:
        order = order or await self.order()
        body: dict[str, Any] = {
            "order_id": order["order_id"],
            "tool": tool,
            "asset_map": {f"{tool}-input-image": order["assets"][0]["id"]},
        }
        if widgets is not None:
            body["widgets"] = widgets
        async with self.session.post("/v3/process", json=body) as r:
            assert r.status == 201, await r.text()
            ids = (await r.json())["process_ids"]
            return str(ids[0])

    async def get(self, path: str, **params: str) -> dict[str, Any]:
        async with self.session.get(path, params=params) as r:
            assert r.status == 200, await r.text()
            return dict(await r.json())


@pytest.fixture
def flow(api: aiohttp.ClientSession) -> Flow:
    return Flow(api)
