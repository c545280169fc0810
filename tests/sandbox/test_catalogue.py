"""The tool list (spec 4.10) and the widgets of a tool (spec 2.5, 4.11)."""

from __future__ import annotations

import aiohttp
import pytest

from asyncsdk.sandbox import Sandbox

from .conftest import Flow, error_of

TOOLS = {
    "tool-virtual-staging": "AI Virtual Staging",
    "tool-virtual-restaging": "AI Virtual Restaging",
    "tool-item-removal": "AI Item Removal",
    "tool-item-removal-mask": "AI Item Removal (Mask)",
    "tool-image-enhancement": "AI Image Enhancement",
    "tool-interior-design": "AI Interior Designer",
    "tool-furniture-set-restyle": "AI Furniture Restyle",
    "tool-wall-change": "AI Wall Change",
    "tool-floor-change": "AI Floor Change",
    "tool-ceiling-change": "AI Ceiling Change",
    "tool-backsplash-change": "AI Backsplash Change",
    "tool-under-construction": "AI Under Construction",
    "tool-day-to-dusk": "AI Day to Dusk",
    "tool-darkness": "AI Darkness",
}
WIDGET_FIELDS = {
    "id",
    "slug",
    "name",
    "description",
    "isOptional",
    "isActive",
    "priority",
    "type",
    "tool",
    "items",
    "related",
    "key",
    "createdAt",
    "updatedAt",
}
ITEM_FIELDS = {
    "slug",
    "name",
    "description",
    "prompt",
    "priority",
    "isActive",
    "isDefault",
    "iconSrc",
    "accessibleIn",
}


async def test_tools_need_no_key(sandbox: Sandbox) -> None:
    async with aiohttp.ClientSession() as s, s.get(f"{sandbox.app_url}/api/tools") as r:
        assert r.status == 200
        body = await r.json()
    assert set(body) == {"data"}
    assert {t["slug"]: t["name"] for t in body["data"]} == TOOLS
    for tool in body["data"]:
        assert set(tool) == {"id", "name", "slug", "isActive"}
        assert tool["isActive"] is True


async def widgets_of(api: aiohttp.ClientSession, slug: str) -> list[dict[str, object]]:
    async with api.get(f"/v1/cathub/tools/{slug}/widgets") as r:
        assert r.status == 200, await r.text()
        body = await r.json()
    assert body["message"] == ""
    return list(body["data"])


async def test_enhancement_widgets_as_the_spec_lists(api: aiohttp.ClientSession) -> None:
    area, options = await widgets_of(api, "tool-image-enhancement")
    assert set(area) == WIDGET_FIELDS
    assert area["slug"] == "widget-area-tool-image-enhancement"
    assert (area["key"], area["type"], area["isOptional"]) == ("space", "tile", False)
    assert [i["slug"] for i in area["items"]] == [
        "item-indoor-widget-area-tool-image-enhancement",
        "item-outdoor-widget-area-tool-image-enhancement",
    ]
    assert options["slug"] == "widget-enhancement-options-tool-image-enhancement"
    assert (options["key"], options["type"], options["isOptional"]) == (
        "enhancement_options",
        "toggle",
        True,
    )
    assert options["related"] == [area["slug"]]
    indoor, outdoor = (
        f"item-{v}-widget-area-tool-image-enhancement" for v in ("indoor", "outdoor")
    )
    access = {i["slug"].split("-widget-")[0]: i["accessibleIn"] for i in options["items"]}
    assert access == {
        "item-lawn-replacement": [outdoor],
        "item-sky-replacement": [outdoor],
        "item-add-fire-to-fireplace": [indoor, outdoor],
        "item-add-screen-to-tv": [indoor],
        "item-remove-extra-objects": [indoor, outdoor],
        "item-remove-minor-blemishes": [indoor, outdoor],
        "item-turn-on-the-light": [indoor, outdoor],
    }
    for item in options["items"]:
        assert set(item) == ITEM_FIELDS


@pytest.mark.parametrize("slug", [*sorted(TOOLS), "tool-furniture-restyle"])
async def test_slug_conventions_hold_for_every_tool(api: aiohttp.ClientSession, slug: str) -> None:
    widgets = await widgets_of(api, slug)
    tool = "tool-furniture-restyle" if "furniture" in slug else slug
    for widget in widgets:
        assert isinstance(widget["slug"], str)
        assert widget["slug"].startswith("widget-")
        assert widget["slug"].endswith(f"-{tool}")
        assert widget["tool"] == tool
        assert widget["createdAt"]
        assert widget["updatedAt"]
        items = widget["items"]
        assert isinstance(items, list)
        assert items
        for item in items:
            assert item["slug"].startswith("item-")
            assert item["slug"].endswith(f"-{widget['slug']}")
    if slug == "tool-item-removal-mask":
        assert widgets == []


async def test_known_example_items_exist(api: aiohttp.ClientSession) -> None:
    staging = await widgets_of(api, "tool-virtual-staging")
    slugs = {i["slug"] for w in staging for i in w["items"]}  # type: ignore[union-attr]
    assert {
        "item-bedroom-widget-space-tool-virtual-staging",
        "item-kitchen-widget-space-tool-virtual-staging",
        "item-living-room-widget-space-tool-virtual-staging",
        "item-modern-widget-style-tool-virtual-staging",
    } <= slugs
    backsplash = await widgets_of(api, "tool-backsplash-change")
    assert [w["slug"] for w in backsplash] == [
        "widget-space-tool-backsplash-change",
        "widget-material-tool-backsplash-change",
    ]
    space_items = [i["slug"] for i in backsplash[0]["items"]]  # type: ignore[union-attr]
    assert space_items == [
        "item-kitchen-widget-space-tool-backsplash-change",
        "item-bathroom-widget-space-tool-backsplash-change",
    ]
    assert "item-grey-marble-widget-material-tool-backsplash-change" in {
        i["slug"]
        for i in backsplash[1]["items"]  # type: ignore[union-attr]
    }


async def test_icons_are_served(api: aiohttp.ClientSession) -> None:
    widget, _ = await widgets_of(api, "tool-day-to-dusk")
    icon = widget["items"][0]["iconSrc"]  # type: ignore[index]
    async with api.get(icon) as r:
        assert r.status == 200
        assert (await r.read()).startswith(b"\x89PNG")
    async with api.get("/icons/item-nothing.png") as r:
        assert r.status == 404


async def test_widgets_errors(sandbox: Sandbox, api: aiohttp.ClientSession) -> None:
    async with api.get("/v1/cathub/tools/tool-teleport/widgets") as r:
        assert r.status == 400  # an invalid value; the spec keeps 404 for ids
        assert (await error_of(r))["key"] == "api_error_invalid_tool"
    url = f"{sandbox.base_url}/v1/cathub/tools/tool-day-to-dusk/widgets"
    async with aiohttp.ClientSession() as anon, anon.get(url) as r:
        assert r.status == 401


async def test_v1_upload_and_both_submit_shapes(
    sandbox: Sandbox, api: aiohttp.ClientSession, flow: Flow
) -> None:
    from .conftest import gradient_jpeg

    async def upload() -> str:
        form = aiohttp.FormData()
        form.add_field("image", gradient_jpeg(), filename="room.jpg", content_type="image/jpeg")
        form.add_field("service_name", "service-ai-virtual-staging")
        async with api.post("/v1/order/image", data=form) as r:
            assert r.status == 201, await r.text()
            body = await r.json()
        assert set(body) == {"order_id"}
        return str(body["order_id"])

    staging = await widgets_of(api, "tool-virtual-staging")
    style = staging[1]
    # docs/sandbox.md: item_id is the item's slug as the widgets endpoint lists it.
    first_style = style["items"][0]["slug"]  # type: ignore[index]

    first = await upload()
    async with api.post(
        "/v1/order",
        json={
            "order_id": first,
            "space_name": "space-bedroom",
            "selected_widgets": [{"id": style["id"], "item_id": first_style}],
        },
    ) as r:
        assert r.status == 201, await r.text()
        assert (await r.json())["order_id"] == first

    second = await upload()
    style_id = int(str(style["id"]))
    async with api.post(
        "/v1/order",
        json={
            "order_id": second,
            "service_name": "service-ai-virtual-staging",
            "widget_ids": [style_id],
        },
    ) as r:
        assert r.status == 201, await r.text()

    third = await upload()
    async with api.post("/v1/order", json={"order_id": third, "space_name": "space-bedroom"}) as r:
        assert r.status == 400
        assert "style" in (await error_of(r))["error"]
    async with api.post("/v1/order", json={"order_id": "nope", "space_name": "space-bedroom"}) as r:
        assert r.status == 404
    async with api.post(
        "/v1/order", json={"order_id": third, "space_name": "space-garage", "selected_widgets": []}
    ) as r:
        assert r.status == 422

    await sandbox.wait_idle()
    for oid in (first, second):
        order = await flow.get(f"/v1/order/{oid}")
        [process] = order["processes"]
        assert (process["tool"], process["status"]) == ("tool-virtual-staging", "done")
    assert sandbox.stats.processes_created == 2


async def test_v1_upload_rules(api: aiohttp.ClientSession) -> None:
    from .conftest import gradient_jpeg

    form = aiohttp.FormData()
    form.add_field("image", gradient_jpeg(), filename="room.jpg", content_type="image/jpeg")
    form.add_field("service_name", "virtual-staging")
    async with api.post("/v1/order/image", data=form) as r:
        assert r.status == 400
        assert "service-ai-" in (await error_of(r))["error"]
    form = aiohttp.FormData(default_to_multipart=True)
    form.add_field("service_name", "service-ai-virtual-staging")
    async with api.post("/v1/order/image", data=form) as r:
        assert r.status == 400
