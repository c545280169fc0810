"""The catalogue logic against the sandbox's catalogue, fetched over HTTP: the two must agree.

Each request the checks accept is sent and must be created (201); each request the checks refuse
is sent unchecked and must be refused by the sandbox too (4xx).
"""

from __future__ import annotations

import io
from collections.abc import AsyncIterator, Mapping
from typing import Any

import aiohttp
import attrs
import pytest
import pytest_asyncio
from PIL import Image

from asyncsdk import (
    Asset,
    AssetRole,
    CatalogueCache,
    CatalogueError,
    Client,
    CreatedOrder,
    InputError,
    MissingWidgetError,
    PreparedProcess,
    SelectionError,
    ToolSlug,
    UnknownItemError,
    UnknownToolError,
    Upload,
    Widget,
    WidgetsArg,
    check_mask,
    mask_from_shapes,
)
from asyncsdk.sandbox import Sandbox


@attrs.define
class Live:
    """The sandbox, a session for unchecked requests, a strict client (its answers must fit the
    models), the client's catalogue cache, and one order."""

    sb: Sandbox
    session: aiohttp.ClientSession
    client: Client
    order: CreatedOrder | None = None

    @property
    def cache(self) -> CatalogueCache:
        return self.client.catalogue

    @property
    def headers(self) -> dict[str, str]:
        return {"x-api-key": self.sb.api_key}

    async def upload(self) -> CreatedOrder:
        photo = io.BytesIO()
        Image.new("RGB", (64, 48), (180, 170, 150)).save(photo, format="JPEG")
        created = await self.client.orders.create(
            Upload(photo.getvalue(), role=AssetRole.PRIMARY_ANGLE, filename="room.jpg"),
            Upload(photo.getvalue(), role=AssetRole.SECONDARY_ANGLE, filename="angle.jpg"),
        )
        mask = mask_from_shapes((64, 48), rectangles=[(10, 10, 30, 30)])
        assert check_mask(mask, photo.getvalue()).remove_pixels == 400
        appended = await self.client.orders.append_mask(
            created.order_id, Upload(mask, filename="mask.png")
        )
        return CreatedOrder(order_id=created.order_id, assets=created.assets + appended.assets)

    @property
    def assets(self) -> tuple[Asset, ...]:
        assert self.order is not None
        return self.order.assets

    def asset_id(self, role: str) -> str:
        return next(a.id for a in self.assets if a.asset_role == role)

    async def send(self, prepared: PreparedProcess) -> tuple[int, Any]:
        assert self.order is not None
        body = prepared.request_body(order_id=self.order.order_id)
        async with self.session.post(
            f"{self.sb.base_url}/v3/process", json=body, headers=self.headers
        ) as resp:
            return resp.status, await resp.json()

    async def prepare(self, *, validate: bool = True, **request: Any) -> PreparedProcess:
        return await self.client.processes.prepare(
            request["tool"],
            request.get("asset_map"),
            request.get("widgets"),
            inputs=request.get("inputs", self.asset_id("primary_angle")),
            order_assets=self.assets,
            validate=validate,
        )


@pytest_asyncio.fixture
async def live() -> AsyncIterator[Live]:
    async with (
        Sandbox() as sb,
        aiohttp.ClientSession() as session,
        sb.client(strict=True) as client,
    ):
        state = Live(sb, session, client)
        state.order = await state.upload()
        yield state


def first_values(widgets: tuple[Widget, ...]) -> dict[str, str]:
    """Each required widget by its key or purpose, with its first item by its display name."""
    chosen: dict[str, str] = {}
    for widget in widgets:
        if widget.is_active and not widget.is_optional:
            name = widget.key or widget.slug.split("-")[1]
            chosen[name] = next(i.name for i in widget.items if i.is_active)
    return chosen


async def test_every_tool_of_the_sandbox_accepts_what_the_checks_accept(live: Live) -> None:
    tools = await live.cache.tools()
    assert {t.slug for t in tools} >= {ToolSlug.VIRTUAL_STAGING, ToolSlug.FURNITURE_SET_RESTYLE}
    for tool in tools:
        widgets = await live.cache.widgets(tool.slug)
        inputs: Mapping[str, str] | str = live.asset_id("primary_angle")
        if tool.slug == ToolSlug.ITEM_REMOVAL_MASK:
            inputs = {"image": live.asset_id("primary_angle"), "mask": live.asset_id("mask")}
        if tool.slug == "tool-darkness":  # a before/after pair
            inputs = {
                "before": live.asset_id("primary_angle"),
                "after": live.asset_id("secondary_angle"),
            }
        prepared = await live.prepare(tool=tool.slug, inputs=inputs, widgets=first_values(widgets))
        status, body = await live.send(prepared)
        assert status == 201, (tool.slug, prepared, body)


async def test_short_forms_and_the_alias_are_accepted(live: Live) -> None:
    cases: list[tuple[str, WidgetsArg]] = [
        (ToolSlug.VIRTUAL_STAGING, {"space": "Living Room", "style": "Hampton"}),
        (ToolSlug.FURNITURE_RESTYLE, {"Room type": "kitchen", "style": "modern"}),
        (
            ToolSlug.IMAGE_ENHANCEMENT,
            {"space": "outdoor", "enhancement_options": ["sky replacement", "lawn-replacement"]},
        ),
        (ToolSlug.BACKSPLASH_CHANGE, {"space": "bathroom", "material": "grey-marble"}),
    ]
    for tool, widgets in cases:
        prepared = await live.prepare(tool=tool, widgets=widgets)
        status, body = await live.send(prepared)
        assert status == 201, (tool, prepared, body)
    furniture = await live.prepare(tool=ToolSlug.FURNITURE_RESTYLE, widgets=cases[1][1])
    assert furniture.tool == ToolSlug.FURNITURE_SET_RESTYLE


@pytest.mark.parametrize(
    ("request_args", "error"),
    [
        ({"tool": "tool-virtual-stagin", "widgets": {"space": "bedroom"}}, UnknownToolError),
        ({"tool": ToolSlug.VIRTUAL_STAGING, "widgets": {"space": "bedroom"}}, MissingWidgetError),
        (
            {
                "tool": ToolSlug.VIRTUAL_STAGING,
                "widgets": {"space": ["bedroom", "kitchen"], "style": "modern"},
            },
            SelectionError,
        ),
        (
            {
                "tool": ToolSlug.VIRTUAL_STAGING,
                "widgets": {
                    "space": "item-modern-widget-style-tool-virtual-staging",
                    "style": "modern",
                },
            },
            UnknownItemError,
        ),
        (
            {
                "tool": ToolSlug.IMAGE_ENHANCEMENT,
                "widgets": {"space": "indoor", "enhancement_options": ["sky-replacement"]},
            },
            SelectionError,
        ),
        ({"tool": ToolSlug.ITEM_REMOVAL_MASK, "inputs": "MASK-AS-PHOTO"}, InputError),
    ],
)
async def test_what_the_checks_refuse_the_sandbox_refuses(
    live: Live, request_args: dict[str, Any], error: type[CatalogueError]
) -> None:
    if request_args.get("inputs") == "MASK-AS-PHOTO":
        swapped = {"image": live.asset_id("mask"), "mask": live.asset_id("primary_angle")}
        request_args = {**request_args, "inputs": swapped}
    with pytest.raises(error):
        await live.prepare(**request_args)
    unchecked = await live.prepare(validate=False, **request_args)
    status, body = await live.send(unchecked)
    assert status in (400, 422), (unchecked, body)
